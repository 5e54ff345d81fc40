import { randomUUID } from "node:crypto";
import { type Backend, type QlessCommands, hasRecurringJobs, migrateQueue } from "@switchyard/core";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreUnderTest, openStore, redisUrl } from "./matrix-backends.js";

/**
 * Lossless round trips: a queue migrated out of its native system into another type of store and
 * back leaves native records equal, field for field, to the ones it started from. What the middle
 * store cannot hold travels in its native extension field (Worker Queue's sy_native, Cloudq's
 * switchyard document). The records are read with HGETALL/LRANGE/SMEMBERS on both Redis databases
 * and no field may differ: none needs an exception, because no job here is active (an active job
 * arrives waiting by design, its lease staying with the store it left: see migration.test.ts). Redis database 9 holds the originals, 10 the copies that came back (qless jids are
 * global to a database, so the two cannot share one).
 */
const REDIS_DB = { original: 9, back: 10 };

/** The two-hop migration: out into `middle`, then back into the other database, same queue name. */
async function roundTrip(from: Backend, middle: Backend, back: Backend, queue: string): Promise<void> {
  for (const [source, target] of [
    [from, middle],
    [middle, back],
  ] as const) {
    const report = await migrateQueue({ from: source, to: target, queue, batchSize: 2 });
    expect(report).toMatchObject({ missing: [], altered: [], clashes: [] });
  }
}

/** The three stores' backends, opened before the suite and closed after it, and the two Redis databases. */
function useRoundTripStores(stores: StoreUnderTest[]) {
  const redis = { original: new Redis(redisUrl(REDIS_DB.original)), back: new Redis(redisUrl(REDIS_DB.back)) };
  let opened: Backend[] = [];
  beforeAll(async () => {
    opened = await Promise.all(stores.map((store) => store.openBackend()));
  });
  afterAll(async () => {
    await Promise.all(opened.map((backend) => backend.close()));
    await Promise.all(stores.map((store) => store.dispose()));
    redis.original.disconnect();
    redis.back.disconnect();
  });
  return { redis, backends: () => opened };
}

/** The fields of two hashes that differ, as [field, before, after]. */
function differences(before: Record<string, string>, after: Record<string, string>) {
  const fields = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...fields].filter((field) => before[field] !== after[field]).map((f) => [f, before[f], after[f]]);
}

describe("qless -> Worker Queue (SQLite) -> qless", () => {
  const stores: StoreUnderTest[] = [openStore("qless", REDIS_DB.original), openStore("sqlite"), openStore("qless", REDIS_DB.back)];
  const { redis, backends } = useRoundTripStores(stores);

  it("every job's ql:j:<jid> hash and history come back as qless wrote them", async () => {
    const [original, middle, back] = backends() as [Backend & QlessCommands, Backend, Backend];
    const queue = stores[2]!.track(stores[0]!.track(`trip-${randomUUID().slice(0, 8)}`));
    // A quarter past a whole second: qless keeps `time` to the fraction, its history in whole seconds.
    const now = Math.floor(Date.now() / 1000) + 0.25;
    const put = (jid: string, klass: string, data: string, delay: number, ...extra: Array<string | number>) =>
      original.qless("put", now, "producer", queue, jid, klass, data, delay, ...extra);
    // As a qless client writes them: data with a client's own spacing, tags, priorities, retries.
    await put("breaks", "Import", '["a", 1]', 0, "retries", 0);
    await put("finishes", "Resize", '{"w": 640}', 0);
    await put("retried", "Sync", "{}", 0, "retries", 2);
    const popped = JSON.parse((await original.qless("pop", now + 1, queue, "worker-1", 3)) as string) as Array<{ jid: string }>;
    expect(popped.map((job) => job.jid).sort()).toEqual(["breaks", "finishes", "retried"]);
    await original.qless("fail", now + 2, "breaks", "worker-1", "import-errors", "row 7 is bad", '["a", 1]');
    await original.qless("complete", now + 3, "finishes", "worker-1", queue, '{"w": 640, "done": true}');
    await original.qless("retry", now + 4, "retried", queue, "worker-1", 0, "timeouts", "took too long");
    await put("waits", "Mailer", '{"to": "ana@example.com", "n": 1.5}', 0, "priority", 5, "tags", '["eu", "vip"]', "retries", 3);
    await put("later", "Report", '{"day": "mon"}', 3600, "tags", '["weekly"]');
    // Blocked on "waits" (qless does not count "finishes", complete); the SQL store holds it blocked in between.
    await put("after", "Mailer", "{}", 0, "depends", '["waits", "finishes"]');
    // A recurring job (its definition in ql:r:, a global key), due already, whose two first instances a peek added.
    const nightly = `nightly-${queue}`;
    const every = ["interval", 0.7, -3, "tags", '["ops"]', "backlog", 4];
    await original.qless("recur", now + 5, queue, nightly, "Digest", '{"to": "all"}', ...every);
    await original.qless("peek", now + 5, queue, 2);
    const jids = ["after", "waits", "later", "breaks", "finishes", "retried", `${nightly}-1`, `${nightly}-2`];

    await roundTrip(original, middle, back, queue);
    expect(await middle.get(queue, "after")).toMatchObject({ state: "blocked", dependsOn: ["waits"] });
    expect(hasRecurringJobs(middle) && (await middle.recurrence(nightly))).toMatchObject({ queue, count: 2, intervalMs: 700 });
    const recurring = await Promise.all([redis.original.hgetall(`ql:r:${nightly}`), redis.back.hgetall(`ql:r:${nightly}`)]);
    expect(recurring[0]).toMatchObject({ count: "2", interval: "0.69999999999999996", data: '{"to": "all"}' });
    expect(differences(recurring[0], recurring[1])).toEqual([]);
    const scores = await Promise.all([
      redis.original.zscore(`ql:q:${queue}-recur`, nightly),
      redis.back.zscore(`ql:q:${queue}-recur`, nightly),
    ]);
    expect(scores[1]).toBe(scores[0]);

    for (const jid of jids) {
      const [before, after] = await Promise.all([redis.original.hgetall(`ql:j:${jid}`), redis.back.hgetall(`ql:j:${jid}`)]);
      expect(Object.keys(before).length).toBeGreaterThan(0);
      expect(differences(before, after), jid).toEqual([]);
      const history = await Promise.all([
        redis.original.lrange(`ql:j:${jid}-history`, 0, -1),
        redis.back.lrange(`ql:j:${jid}-history`, 0, -1),
      ]);
      expect(history[1], jid).toEqual(history[0]);
      for (const set of ["dependencies", "dependents"]) {
        const both = await Promise.all([redis.original.smembers(`ql:j:${jid}-${set}`), redis.back.smembers(`ql:j:${jid}-${set}`)]);
        expect(both[1].sort(), `${jid}-${set}`).toEqual(both[0].sort());
      }
    }
    expect(await redis.original.smembers("ql:j:after-dependencies")).toEqual(["waits"]);
    // Recurring definitions are global keys, not the queue's: removed here, as the stores' disposal does not.
    await Promise.all([redis.original.del(`ql:r:${nightly}`), redis.back.del(`ql:r:${nightly}`)]);
  });
});

describe("glide-mq -> Cloudq (FerretDB) -> glide-mq", () => {
  const stores: StoreUnderTest[] = [
    openStore("glidemq", REDIS_DB.original),
    // Cloudq's default layout deletes completed jobs; this one keeps them, as the round trip needs.
    openStore("cloudq", REDIS_DB.original, { completion: "mark-deleted" }),
    openStore("glidemq", REDIS_DB.back),
  ];
  const { redis, backends } = useRoundTripStores(stores);

  it("every job's glide:{queue}:job:<id> hash and dependency set come back as glide-mq's layout had them", async () => {
    const [original, middle, back] = backends() as [Backend, Backend, Backend];
    const queue = stores[2]!.track(stores[0]!.track(`trip-${randomUUID().slice(0, 8)}`));
    const finishes = await original.enqueue(queue, { name: "resize", data: { w: 640 }, maxAttempts: 2 });
    await original.reserve(queue, { worker: "w1" });
    await original.complete(queue, finishes.job.id, { worker: "w1", result: { done: true } });
    const breaks = await original.enqueue(queue, { name: "import", data: ["a", 1], maxAttempts: 1 });
    await original.reserve(queue, { worker: "w1" });
    await original.fail(queue, breaks.job.id, { worker: "w1", error: { message: "row 7 is bad" }, retry: false });
    const waits = await original.enqueue(queue, { name: "mail", data: { to: "ana" }, priority: 3, uniqueKey: "mail-ana" });
    const later = await original.enqueue(queue, { name: "report", data: null, delay: 3_600_000, backoff: { type: "fixed", delay: 500 } });
    const child = await original.enqueue(queue, { name: "after-mail", data: 1, dependsOn: [waits.job.id] });
    const ids = [finishes, breaks, waits, later, child].map((made) => made.job.id);

    await roundTrip(original, middle, back, queue);

    for (const id of ids) {
      const key = `glide:{${queue}}:job:${id}`;
      const [before, after] = await Promise.all([redis.original.hgetall(key), redis.back.hgetall(key)]);
      expect(Object.keys(before).length).toBeGreaterThan(0);
      expect(differences(before, after), id).toEqual([]);
      const deps = await Promise.all([
        redis.original.smembers(`glide:{${queue}}:deps:${id}`),
        redis.back.smembers(`glide:{${queue}}:deps:${id}`),
      ]);
      expect(deps[1].sort(), id).toEqual(deps[0].sort());
    }
  });
});
