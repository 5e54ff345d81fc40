import { randomUUID } from "node:crypto";
import type { Probe } from "@switchyard/conformance";
import type { Backend } from "@switchyard/core";
import { MongoClient, ObjectId } from "mongodb";
import { afterAll, beforeAll } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { type CompletionMode, type StateField, createCloudqBackend } from "../src/index.js";

/** A database of its own per test file, so parallel files never see each other's jobs. */
export function testDatabase(prefix: string): string {
  return `cloudq_${prefix}_${randomUUID().slice(0, 8)}`;
}

export function mongoUrl(): string {
  return serviceUrl("mongo");
}

/** A raw client for probes and legacy inserts: it reads and writes documents as the legacy servers do. */
export async function rawClient(): Promise<MongoClient> {
  const client = new MongoClient(mongoUrl());
  await client.connect();
  return client;
}

/** Finds the raw document of a job id the way the legacy servers address it (by `_id`), or by `switchyard.id`. */
export function rawFilter(queue: string, id: string): Record<string, unknown> {
  return /^[0-9a-f]{24}$/.test(id) ? { queue, _id: new ObjectId(id) } : { queue, "switchyard.id": id };
}

/** The conformance probe: findOne/countDocuments on `cloudq.jobs`, never through the adapter. */
export function cloudqProbe(client: () => MongoClient, database: string, stateField: StateField, completion: CompletionMode): Probe {
  const jobs = () => client().db(database).collection("cloudq.jobs");
  return {
    async nativeState(queue, id) {
      const document = await jobs().findOne(rawFilter(queue, id));
      if (!document) return null;
      const state = document[stateField];
      return typeof state === "string" ? state : null;
    },
    countJobs: (queue) => jobs().countDocuments({ queue }),
    expectedStates: {
      waiting: ["queued"],
      delayed: ["queued"],
      active: ["reserved"],
      completed: completion === "remove" ? [null] : ["deleted"],
      failed: ["failed"],
      canceled: ["canceled"],
      blocked: ["blocked"],
    },
  };
}

/**
 * A test file's own database, a raw client for probes and a default backend on it, opened before the
 * file's tests and closed after them. `queue()` gives a fresh queue name with the given prefix.
 */
export function useCloudqDatabase(prefix: string, queuePrefix: string) {
  const database = testDatabase(prefix);
  let client: MongoClient | undefined;
  let backend: Backend | undefined;
  beforeAll(async () => {
    client = await rawClient();
    backend = createCloudqBackend({ url: mongoUrl(), database });
    await backend.ready();
  });
  afterAll(async () => {
    await backend?.close();
    await client?.close();
  });
  const opened = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("used before beforeAll ran");
    return value;
  };
  return {
    database,
    client: () => opened(client),
    backend: () => opened(backend),
    jobs: () => opened(client).db(database).collection("cloudq.jobs"),
    queue: () => `${queuePrefix}-${Math.random().toString(36).slice(2, 10)}`,
  };
}
