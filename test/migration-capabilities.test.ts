import { randomUUID } from "node:crypto";
import { type Backend, type QlessCommands, UnsupportedError, hasRecurringJobs, migrateQueue } from "@switchyard/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreName, type StoreUnderTest, openStore } from "./matrix-backends.js";

/**
 * Pairs where the target cannot hold what the source has. The rule (DESIGN.md): never a silent
 * downgrade. The migration stops with UnsupportedError naming the job, writes nothing of that page,
 * and what earlier pages copied stays. Redis database 9.
 */
const REDIS_DB = 9;

function usePair(fromName: StoreName, toName: StoreName) {
  const stores: { from: StoreUnderTest; to: StoreUnderTest } = { from: openStore(fromName, REDIS_DB), to: openStore(toName, REDIS_DB) };
  const backends = {} as { from: Backend; to: Backend };
  beforeAll(async () => {
    backends.from = await stores.from.openBackend();
    backends.to = await stores.to.openBackend();
  });
  afterAll(async () => {
    await Promise.all([backends.from?.close(), backends.to?.close()]);
    await Promise.all([stores.from.dispose(), stores.to.dispose()]);
  });
  return { stores, backends, queue: () => stores.to.track(stores.from.track(`migcap-${randomUUID().slice(0, 8)}`)) };
}

describe("migration sqlite -> qless (qless deletes canceled jobs)", () => {
  const { stores, backends, queue: newQueue } = usePair("sqlite", "qless");

  it("a canceled job stops the migration with UnsupportedError naming it; the jobs of earlier pages are kept", async () => {
    const queue = newQueue();
    const { from, to } = backends;
    const kept = await from.enqueue(queue, { name: "kept" });
    const canceled = await from.enqueue(queue, { name: "withdrawn" });
    await from.cancel(queue, canceled.job.id);
    const failure = await migrateQueue({ from, to, queue, batchSize: 1 }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(UnsupportedError);
    expect((failure as Error).message).toContain(canceled.job.id);
    expect(await stores.to.nativeState(queue, kept.job.id)).toBe("waiting");
    expect(await stores.to.nativeState(queue, canceled.job.id)).toBeNull();
    expect(await stores.to.countJobs(queue)).toBe(1);
  });
});

describe("migration sqlite -> qless (unique keys)", () => {
  const { backends, queue: newQueue } = usePair("sqlite", "qless");

  it("a waiting job keeps its unique key, so a producer's retry on the target gets the migrated job", async () => {
    const queue = newQueue();
    const { from, to } = backends;
    const keyed = await from.enqueue(queue, { name: "charge", uniqueKey: "order-42" });
    await migrateQueue({ from, to, queue });
    expect((await to.get(queue, keyed.job.id))?.uniqueKey).toBe("order-42");
    expect(await to.enqueue(queue, { name: "charge", uniqueKey: "order-42" })).toMatchObject({ created: false, job: { id: keyed.job.id } });
  });
});

describe("migration qless -> glidemq (glide-mq has no tags)", () => {
  const { backends, queue: newQueue } = usePair("qless", "glidemq");

  it("a tagged job is refused with UnsupportedError rather than arriving without its tags", async () => {
    const queue = newQueue();
    const { from, to } = backends;
    const tagged = await from.enqueue(queue, { name: "billing", tags: ["invoice"] });
    const outcome = await migrateQueue({ from, to, queue }).catch((error: unknown) => error);
    if (!(outcome instanceof UnsupportedError)) expect((await to.get(queue, tagged.job.id))?.tags).toEqual(["invoice"]);
    expect(outcome).toBeInstanceOf(UnsupportedError);
  });

  it("a waiting job keeps its unique key, so a producer's retry on the target gets the migrated job", async () => {
    const queue = newQueue();
    const { from, to } = backends;
    const keyed = await from.enqueue(queue, { name: "charge", uniqueKey: "order-42" });
    await migrateQueue({ from, to, queue });
    expect(await to.enqueue(queue, { name: "charge", uniqueKey: "order-42" })).toMatchObject({ created: false, job: { id: keyed.job.id } });
  });
});

describe("migration qless -> a store that keeps no recurring jobs", () => {
  const { stores, backends, queue: newQueue } = usePair("qless", "glidemq");
  /** The glide-mq target as an adapter without RecurringJobs would be (every store here has them). */
  const withoutRecurring = (backend: Backend): Backend =>
    new Proxy(backend, {
      get: (target, property, receiver) =>
        ["putRecurrence", "recurrences", "recurrence"].includes(String(property)) ? undefined : Reflect.get(target, property, receiver),
    });

  it("a queue with a recurring job stops before anything is written, naming it", async () => {
    const queue = newQueue();
    const { from, to } = backends;
    await from.enqueue(queue, { name: "plain" });
    const recur = `r-${queue}`;
    await (from as Backend & QlessCommands).qless("recur", Date.now() / 1000, queue, recur, "Digest", "{}", "interval", 60, 0);
    try {
      const failure = await migrateQueue({ from, to: withoutRecurring(to), queue }).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(UnsupportedError);
      expect((failure as Error).message).toContain("1 recurring job(s)");
      expect(await stores.to.countJobs(queue)).toBe(0);
      // It is still the source's: nothing was moved or dropped.
      expect(hasRecurringJobs(from) && (await from.recurrence(recur))).toMatchObject({ queue });
      // glide-mq itself keeps them (Switchyard's own keys beside its layout): the same migration carries it.
      expect((await migrateQueue({ from, to, queue })).recurrences).toBe(1);
      expect(hasRecurringJobs(to) && (await to.recurrence(recur))).toMatchObject({ queue, name: "Digest", intervalMs: 60_000 });
    } finally {
      for (const backend of [from, to]) if (hasRecurringJobs(backend)) await backend.removeRecurrence(recur);
    }
  });
});

describe("migration qless -> sqlite in move mode (recurring jobs move too)", () => {
  const { backends, queue: newQueue } = usePair("qless", "sqlite");

  it("the definition is written to the target under the target queue, then deleted from the source", async () => {
    const queue = newQueue();
    const { from, to } = backends;
    const recur = `r-${queue}`;
    await (from as Backend & QlessCommands).qless(
      "recur",
      1_700_000_000,
      queue,
      recur,
      "Digest",
      '{"a": 1}',
      "interval",
      30,
      5,
      "retries",
      2,
    );
    const report = await migrateQueue({ from, to, queue, mode: "move" });
    expect(report.recurrences).toBe(1);
    expect(hasRecurringJobs(from) && (await from.recurrence(recur))).toBeNull();
    expect(hasRecurringJobs(to) && (await to.recurrence(recur))).toMatchObject({
      queue,
      name: "Digest",
      data: { a: 1 },
      maxAttempts: 3,
      intervalMs: 30_000,
      nextAt: 1_700_000_005_000,
      native: { qless: { data: '{"a": 1}' } },
    });
  });
});

describe("migration glidemq -> cloudq in the default `remove` layout (Cloudq keeps no completed jobs)", () => {
  const { stores, backends, queue: newQueue } = usePair("glidemq", "cloudq");

  it("completed jobs are counted as imported but not written, and the report lists them as missing", async () => {
    const queue = newQueue();
    const { from, to } = backends;
    expect(to.capabilities.keepsCompleted).toBe(false);
    const done = await from.enqueue(queue, { name: "done" });
    await from.reserve(queue, { worker: "w" });
    await from.complete(queue, done.job.id, { worker: "w" });
    const open = await from.enqueue(queue, { name: "open" });
    const report = await migrateQueue({ from, to, queue });
    expect(report).toMatchObject({ read: 2, imported: 2, skipped: 0, missing: [done.job.id] });
    expect(await stores.to.nativeState(queue, open.job.id)).toBe("queued");
    expect(await stores.to.countJobs(queue)).toBe(1);
  });
});

describe("migration sqlite -> glidemq into a queue that already has jobs (both number their jobs 1, 2, ...)", () => {
  const { backends, queue: newQueue } = usePair("sqlite", "glidemq");

  it("a source job whose id belongs to a different job in the target is reported as a clash, never silently skipped", async () => {
    const queue = newQueue();
    const { from, to } = backends;
    const resident = await to.enqueue(queue, { name: "resident", id: "1" });
    const incoming = await from.enqueue(queue, { name: "incoming" });
    expect(incoming.job.id).toBe(resident.job.id);
    const report = await migrateQueue({ from, to, queue });
    expect(report.clashes).toEqual([incoming.job.id]);
    expect(report.skipped).toBe(1);
  });
});
