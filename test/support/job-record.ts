import type { Job } from "@switchyard/core";

/**
 * A whole job record as a store's export hands it to an import (what migrations and their benches
 * seed with): a waiting job made `createdAt` ago with nothing run yet, then the fields given.
 */
export function jobRecord(fields: Pick<Job, "id" | "queue" | "name" | "createdAt"> & Partial<Job>): Job {
  return {
    data: null,
    state: "waiting",
    priority: 0,
    runAt: null,
    attempts: 0,
    maxAttempts: 1,
    backoff: null,
    lease: null,
    startedAt: null,
    finishedAt: null,
    result: null,
    error: null,
    progress: null,
    tags: [],
    dependsOn: [],
    uniqueKey: null,
    native: {},
    ...fields,
  };
}
