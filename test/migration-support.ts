import type { Backend, Job, JobState } from "@switchyard/core";
import { expect } from "vitest";
import type { StoreUnderTest } from "./matrix-backends.js";

/** Every job of a queue, read page by page through the adapter's own export. */
export async function exportAll(backend: Backend, queue: string): Promise<Job[]> {
  const jobs: Job[] = [];
  let cursor: string | null = null;
  do {
    const page: Awaited<ReturnType<Backend["export"]>> = await backend.export(queue, cursor === null ? { limit: 3 } : { limit: 3, cursor });
    jobs.push(...page.items);
    cursor = page.cursor;
  } while (cursor !== null);
  return jobs;
}

async function reserveOnly(backend: Backend, queue: string, worker: string): Promise<Job> {
  const [job] = await backend.reserve(queue, { worker, leaseMs: 600_000 });
  if (!job) throw new Error(`nothing to reserve in ${queue}`);
  return job;
}

/**
 * Puts one job in each state the source can hold, through the source's own adapter: active,
 * failed for good, completed with a result (where the source keeps completed jobs), delayed for a
 * retry, then plain waiting (with a priority and a unique key), waiting with a negative priority
 * and tags, delayed, and blocked on a waiting job. Each reserve finds exactly one due job, so the
 * states land on the jobs their names say. Tags and dependencies are set only when the target
 * holds them too: a target without them refuses such jobs (see migration-capabilities.test.ts).
 */
export async function seedEveryState(backend: Backend, queue: string, target: Backend): Promise<Job[]> {
  await backend.enqueue(queue, { name: "runs", data: { step: "active" }, maxAttempts: 4 });
  await reserveOnly(backend, queue, "old-worker");

  await backend.enqueue(queue, { name: "breaks", data: ["failed", 1], maxAttempts: 1 });
  const breaks = await reserveOnly(backend, queue, "old-worker");
  await backend.fail(queue, breaks.id, { worker: "old-worker", error: { message: "disk full" }, retry: false });

  if (backend.capabilities.keepsCompleted) {
    await backend.enqueue(queue, { name: "finishes", data: "completed" });
    const finishes = await reserveOnly(backend, queue, "old-worker");
    await backend.complete(queue, finishes.id, { worker: "old-worker", result: { rows: 3 } });
  }

  await backend.enqueue(queue, {
    name: "retries",
    data: { step: "retry" },
    maxAttempts: 5,
    backoff: { type: "exponential", delay: 2_000 },
  });
  const retries = await reserveOnly(backend, queue, "old-worker");
  // A long backoff: a retry that is already due is `delayed` on glide-mq (until promoted) but `waiting` elsewhere.
  await backend.fail(queue, retries.id, { worker: "old-worker", error: { message: "timeout" }, retryDelay: 3_600_000 });

  const waits = await backend.enqueue(queue, {
    name: "waits",
    data: { nested: { list: [1, "two", null] } },
    priority: 7,
    uniqueKey: "invoice-7",
  });
  const tags = backend.capabilities.tags && target.capabilities.tags ? ["billing", "eu"] : [];
  await backend.enqueue(queue, { name: "waits-low", data: "ünïcode ✓", priority: -2, tags });
  await backend.enqueue(queue, { name: "waits-later", data: 42, delay: 3_600_000 });
  if (backend.capabilities.dependencies && target.capabilities.dependencies) {
    await backend.enqueue(queue, { name: "waits-for-parent", data: { after: "waits" }, dependsOn: [waits.job.id] });
  }
  return exportAll(backend, queue);
}

/** A migrated job keeps everything but its lease: an active job arrives waiting. */
export const arrivalState = (state: JobState): JobState => (state === "active" ? "waiting" : state);

/** The fields a migration must carry; createdAt as finely as the target store keeps it, less its known gaps. */
const comparable = (job: Job, resolutionMs = 1, drops: StoreUnderTest["importDrops"] = []) => ({
  id: job.id,
  name: job.name,
  data: job.data,
  attempts: job.attempts,
  maxAttempts: job.maxAttempts,
  priority: job.priority,
  createdAt: Math.floor(job.createdAt / resolutionMs) * resolutionMs,
  backoff: job.backoff,
  uniqueKey: drops.includes("uniqueKey") ? null : job.uniqueKey,
  tags: drops.includes("tags") ? [] : job.tags,
  dependsOn: [...job.dependsOn].sort(),
  state: arrivalState(job.state),
});

/**
 * Nothing lost: the target adapter returns every source job with the same fields, and the target's
 * native store holds one record per job, in the native state for its core state.
 */
export async function expectSameJobs(source: Job[], target: Backend, targetStore: StoreUnderTest, queue: string): Promise<void> {
  const byId = (jobs: Job[]) => [...jobs].sort((a, b) => a.id.localeCompare(b.id));
  const arrived = await exportAll(target, queue);
  const resolution = targetStore.createdAtResolutionMs;
  const expected = byId(source).map((job) => comparable(job, resolution, targetStore.importDrops));
  expect(byId(arrived).map((job) => comparable(job))).toEqual(expected);
  for (const job of source) {
    const fetched = await target.get(queue, job.id);
    expect(fetched?.state).toBe(arrivalState(job.state));
    if (job.state === "delayed") expect(fetched?.runAt).toBe(job.runAt);
    if (job.error) expect(fetched?.error?.message).toBe(job.error.message);
    if (job.result !== null && target.capabilities.results) expect(fetched?.result).toEqual(job.result);
    expect(targetStore.nativeStates[arrivalState(job.state)]).toContain(await targetStore.nativeState(queue, job.id));
  }
  expect(await targetStore.countJobs(queue)).toBe(source.length);
  // The unique key still deduplicates on the target: a producer's retry gets the migrated job.
  const keyed = source.find((job) => job.uniqueKey !== null && job.state === "waiting");
  if (keyed && !targetStore.importDrops.includes("uniqueKeyDedup")) {
    const retry = await target.enqueue(queue, { name: keyed.name, uniqueKey: keyed.uniqueKey! });
    expect(retry).toMatchObject({ created: false, job: { id: keyed.id } });
  }
}
