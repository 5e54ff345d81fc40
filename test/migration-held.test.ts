import { randomUUID } from "node:crypto";
import { type Backend, type HeldJob, type ImportResult, type Job, migrateQueue } from "@switchyard/core";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreName, type StoreUnderTest, openStore, redisUrl } from "./matrix-backends.js";
import { exportAll, seedEveryState } from "./migration-support.js";

/**
 * ImportResult.held: an import that answers what the store holds once it has written (read from the
 * stored records by the same script), so migrateQueue checks each page without reading it back.
 * SQLite is the source; the Redis stores are the targets, in Redis database 5 (qless and glide-mq
 * keys do not overlap there).
 */
const REDIS_DB = 5;
const TARGETS: StoreName[] = ["glidemq", "qless"];

const heldFields = (job: HeldJob): HeldJob => ({
  id: job.id,
  name: job.name,
  data: job.data,
  state: job.state,
  priority: job.priority,
  attempts: job.attempts,
  runAt: job.runAt,
  createdAt: job.createdAt,
});

/** The backend with its import and reads replaced as `change` says; every other call goes to it. */
function wrapped(backend: Backend, change: Partial<Pick<Backend, "import" | "get" | "getMany">>): Backend {
  return new Proxy(backend, {
    get: (target, property, receiver) =>
      property in change ? change[property as keyof typeof change] : Reflect.get(target, property, receiver),
  });
}

/** The job's state as the native record stores it, read straight from Redis. */
async function nativeState(redis: Redis, store: StoreName, queue: string, id: string): Promise<string | null> {
  return store === "qless" ? redis.hget(`ql:j:${id}`, "state") : redis.hget(`glide:{${queue}}:job:${id}`, "state");
}

/** The job's name as the native record stores it, read straight from Redis. */
async function nativeName(redis: Redis, store: StoreName, queue: string, id: string): Promise<string | null> {
  return store === "qless" ? redis.hget(`ql:j:${id}`, "klass") : redis.hget(`glide:{${queue}}:job:${id}`, "name");
}

describe.each(TARGETS)("import into %s answers what the store holds (held)", (targetName) => {
  const sourceStore = openStore("sqlite");
  const targetStore: StoreUnderTest = openStore(targetName, REDIS_DB);
  const redis = new Redis(redisUrl(REDIS_DB));
  let source: Backend;
  let target: Backend;
  const newQueue = () => targetStore.track(`held-${randomUUID().slice(0, 8)}`);

  beforeAll(async () => {
    [source, target] = await Promise.all([sourceStore.openBackend(), targetStore.openBackend()]);
  });
  afterAll(async () => {
    await Promise.all([source.close(), target.close()]);
    await Promise.all([sourceStore.dispose(), targetStore.dispose()]);
    redis.disconnect();
  });

  it("held is each job as get() then reads it, in every state, and the native record has its name", async () => {
    const queue = newQueue();
    await seedEveryState(source, queue, target);
    const jobs = await exportAll(source, queue);
    const result = await target.import(queue, jobs);
    expect(result).toMatchObject({ imported: jobs.length, skipped: [] });
    expect(result.held).toHaveLength(jobs.length);
    for (const [i, job] of jobs.entries()) {
      const stored = await target.get(queue, job.id);
      expect(stored).not.toBeNull();
      expect(heldFields(result.held?.[i] as HeldJob)).toEqual(heldFields(stored as Job));
      expect(await nativeName(redis, targetName, queue, job.id)).toBe(result.held?.[i]?.name);
    }
  });

  it("held reads the store, not the input: an id the queue already holds answers the job stored under it", async () => {
    const queue = newQueue();
    await source.enqueue(queue, { name: "first", data: { v: 1 } });
    const [first] = await exportAll(source, queue);
    await target.import(queue, [first as Job]);
    const second: Job = { ...(first as Job), name: "second", data: { v: 2 } };
    const result = await target.import(queue, [second]);
    expect(result).toMatchObject({ imported: 0, skipped: [second.id] });
    expect(result.held?.[0]).toMatchObject({ id: second.id, name: "first", data: { v: 1 } });
    expect(await nativeName(redis, targetName, queue, second.id)).toBe("first");
  });

  it("a blocked job whose dependency the queue holds completed is stored waiting, and held says so", async () => {
    const queue = newQueue();
    await source.enqueue(queue, { name: "parent", data: { v: 1 } });
    await source.enqueue(queue, { name: "child", data: { v: 2 } });
    const [parent, child] = (await exportAll(source, queue)) as [Job, Job];
    const finishedAt = parent.createdAt + 1_000;
    await target.import(queue, [{ ...parent, state: "completed", startedAt: parent.createdAt, finishedAt, result: { ok: true } }]);
    const result = await target.import(queue, [{ ...child, state: "blocked", dependsOn: [parent.id] }]);
    expect(result).toMatchObject({ imported: 1, skipped: [] });
    expect(result.held?.[0]?.state).toBe("waiting");
    expect(heldFields(result.held?.[0] as HeldJob)).toEqual(heldFields((await target.get(queue, child.id)) as Job));
    expect(await nativeState(redis, targetName, queue, child.id)).toBe("waiting");
  });

  it("migrateQueue checks every page with held and reads none back", async () => {
    const queue = newQueue();
    await seedEveryState(source, queue, target);
    let reads = 0;
    const counted = wrapped(target, {
      get: (...args) => {
        reads++;
        return target.get(...args);
      },
      getMany: (...args) => {
        reads++;
        return (target.getMany as NonNullable<Backend["getMany"]>)(...args);
      },
    });
    const report = await migrateQueue({ from: source, to: counted, queue, batchSize: 3 });
    expect(report).toMatchObject({ imported: report.read, missing: [], altered: [], clashes: [] });
    expect(reads).toBe(0);
  });

  it("an import that answers no held (an adapter without it) is read back with getMany, one call per page", async () => {
    const queue = newQueue();
    await seedEveryState(source, queue, target);
    let pagesReadBack = 0;
    const withoutHeld = wrapped(target, {
      import: async (q: string, jobs: Job[]): Promise<ImportResult> => {
        const { held: _dropped, ...rest } = await target.import(q, jobs);
        return rest;
      },
      getMany: (...args) => {
        pagesReadBack++;
        return (target.getMany as NonNullable<Backend["getMany"]>)(...args);
      },
    });
    const report = await migrateQueue({ from: source, to: withoutHeld, queue, batchSize: 3 });
    expect(report).toMatchObject({ imported: report.read, missing: [], altered: [], clashes: [] });
    expect(pagesReadBack).toBe(Math.ceil(report.read / 3));
  });

  it("held is compared with the job as read: a store that wrote other data is reported altered", async () => {
    const queue = newQueue();
    await source.enqueue(queue, { name: "kept", data: { v: 1 } });
    await source.enqueue(queue, { name: "changed", data: { v: 1 } });
    // The store is given (and so holds) other data for one job than the source had.
    const rewriting = wrapped(target, {
      import: (q: string, jobs: Job[]) =>
        target.import(
          q,
          jobs.map((job) => (job.name === "changed" ? { ...job, data: { v: 2 } } : job)),
        ),
    });
    const report = await migrateQueue({ from: source, to: rewriting, queue });
    const changed = (await exportAll(source, queue)).find((job) => job.name === "changed") as Job;
    expect(report.altered).toEqual([changed.id]);
    expect(report.missing).toEqual([]);
  });
});
