import { randomUUID } from "node:crypto";
import { eventually } from "@switchyard/conformance";
import type { Backend } from "@switchyard/core";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import {
  GlideConsumer,
  GlideProducer,
  MAX_JOB_DATA_SIZE,
  PRIORITY_SHIFT,
  createGlideMqBackend,
  fromGlidePriority,
  queueKeys,
  toGlidePriority,
} from "../src/index.js";
import { removeQueues } from "./support/cleanup.js";
import { untilPendingIdle } from "./support/pending.js";

// What the conformance suite cannot see: the native glide-mq keys our writes leave, read directly.
const url = `${serviceUrl("redis")}/4`;
let redis: Redis;
let backend: Backend;
const used = new Set<string>();
const queue = () => {
  const name = `nl-${randomUUID().slice(0, 8)}`;
  used.add(name);
  return name;
};

beforeAll(async () => {
  redis = new Redis(url);
  backend = createGlideMqBackend({ redis });
  await backend.ready();
});
afterAll(async () => {
  await backend.close();
  await removeQueues(redis, used);
  await redis.quit();
});

describe("glidemq-valkey: native layout of what the Backend writes", () => {
  it("an enqueued job is a glide-mq job hash, a stream entry {jobId, name} and an `added` event", async () => {
    const q = queue();
    const k = queueKeys(q);
    const { job } = await backend.enqueue(q, {
      name: "mail",
      data: { to: "x" },
      maxAttempts: 4,
      backoff: { type: "exponential", delay: 50 },
    });
    const hash = await redis.hgetall(k.job(job.id));
    expect(hash).toMatchObject({
      id: job.id,
      name: "mail",
      data: '{"to":"x"}',
      attemptsMade: "0",
      delay: "0",
      priority: "0",
      maxAttempts: "4",
      state: "waiting",
    });
    expect(JSON.parse(hash.opts ?? "")).toEqual({ attempts: 4, backoff: { type: "exponential", delay: 50 } });
    expect(await redis.get(k.id)).toBe(job.id);
    const [[, fields] = ["", []]] = await redis.xrange(k.stream, "-", "+");
    expect(fields).toEqual(["jobId", job.id, "name", "mail"]);
    const events = await redis.xrange(k.events, "-", "+");
    expect(events.map(([, f]) => f)).toEqual([["event", "added", "jobId", job.id, "name", "mail"]]);
  });

  it("core priority maps monotonically onto glide-mq's 1 = highest scale, and back", () => {
    expect([2048, 100, 1, 0, -5].map(toGlidePriority)).toEqual([1, 1949, 2048, 0, 0]);
    expect([1, 1949, 2048, 0].map(fromGlidePriority)).toEqual([2048, 100, 1, 0]);
    const ordered = [5000, 2048, 7, 1, 0, -3].map(toGlidePriority);
    // glide-mq drains bands 1..2048 first, then the stream's 0: a non-decreasing sequence of runs.
    const runOrder = ordered.map((g) => (g === 0 ? 4096 : g));
    expect([...runOrder].sort((a, b) => a - b)).toEqual(runOrder);
  });

  it("a prioritized job waits in `scheduled` at priority*2^42; an out-of-range core priority is kept in syPriority", async () => {
    const q = queue();
    const k = queueKeys(q);
    const { job } = await backend.enqueue(q, { name: "p", priority: 9 });
    expect(await redis.zscore(k.scheduled, job.id)).toBe(String(toGlidePriority(9) * PRIORITY_SHIFT));
    expect(await redis.hget(k.job(job.id), "state")).toBe("prioritized");
    const { job: low } = await backend.enqueue(q, { name: "low", priority: -3 });
    expect(await redis.hmget(k.job(low.id), "priority", "syPriority")).toEqual(["0", "-3"]);
    expect((await backend.get(q, low.id))?.priority).toBe(-3);
  });

  it("a delayed job's score is time + delay in band 0, state delayed", async () => {
    const q = queue();
    const k = queueKeys(q);
    const before = Date.now();
    const { job } = await backend.enqueue(q, { name: "later", delay: 60_000 });
    const score = Number(await redis.zscore(k.scheduled, job.id));
    expect(score).toBeGreaterThanOrEqual(before + 60_000);
    expect(score).toBeLessThan(before + 61_000);
    expect(await redis.hmget(k.job(job.id), "state", "delay")).toEqual(["delayed", "60000"]);
  });

  it("reserve marks the job active with processedOn/lastActive, the lease in sy* fields only; complete clears them", async () => {
    const q = queue();
    const k = queueKeys(q);
    const { job } = await backend.enqueue(q, { name: "work" });
    const [reserved] = await backend.reserve(q, { worker: "w1", leaseMs: 10_000 });
    const hash = await redis.hgetall(k.job(job.id));
    expect(hash).toMatchObject({ state: "active", syWorker: "w1", syLeaseUntil: String(reserved?.lease?.expiresAt) });
    expect(hash.processedOn).toBe(hash.lastActive);
    expect(await redis.zscore(k.leases, job.id)).toBe(hash.syLeaseUntil);
    const [pending] = (await redis.xpending(k.stream, "workers")) as [number];
    expect(pending).toBe(1);
    await backend.complete(q, job.id, { worker: "w1", result: { n: 1 } });
    const done = await redis.hgetall(k.job(job.id));
    expect(Object.keys(done).filter((f) => f.startsWith("sy"))).toEqual([]);
    expect(done).toMatchObject({ state: "completed", returnvalue: '{"n":1}' });
    expect(await redis.xlen(k.stream)).toBe(0);
    expect(await redis.zscore(k.completed, job.id)).toBe(done.finishedOn);
    const minute = Number(done.finishedOn) - (Number(done.finishedOn) % 60_000);
    expect(await redis.hget(k.metricsCompleted, `m:${minute}:c`)).toBe("1");
  });

  it("a job that depends on another is waiting-children with glide-mq's deps:/parents: sets, released on completion", async () => {
    const q = queue();
    const k = queueKeys(q);
    const { job: first } = await backend.enqueue(q, { name: "first" });
    const { job: then } = await backend.enqueue(q, { name: "then", dependsOn: [first.id] });
    expect(await redis.smembers(k.deps(then.id))).toEqual([`glide:{${q}}:${first.id}`]);
    expect(await redis.smembers(`${k.base}parents:${first.id}`)).toEqual([`glide:{${q}}:${then.id}`]);
    expect((await backend.counts(q)).blocked).toBe(1);
    await backend.reserve(q, { worker: "w" });
    await backend.complete(q, first.id, { worker: "w" });
    expect(await redis.hmget(k.job(then.id), "state", "depsCompleted", `depdone:glide:{${q}}:${first.id}`)).toEqual(["waiting", "1", "1"]);
    await expect(backend.enqueue(q, { name: "x", dependsOn: ["404"] })).rejects.toMatchObject({ code: "VALIDATION" });
  });

  it("import() keeps a unique key as the job's dedup record, and refuses a tagged job before writing anything", async () => {
    const source = queue();
    const target = queue();
    const { job } = await backend.enqueue(source, { name: "charge", uniqueKey: "order-9" });
    const tagged = { ...job, id: "t1", tags: ["invoice"] };
    await expect(backend.import(target, [job, tagged])).rejects.toMatchObject({ code: "UNSUPPORTED" });
    expect(await redis.exists(queueKeys(target).job(job.id))).toBe(0);
    await backend.import(target, [job]);
    expect(await redis.hget(queueKeys(target).dedup, "order-9")).toBe(`${job.id}:${job.createdAt}`);
    expect(await backend.enqueue(target, { name: "charge", uniqueKey: "order-9" })).toMatchObject({ created: false, job: { id: job.id } });
  });

  it("cancel() is glide-mq's revoke: failed with failedReason revoked and revoked=1, its stream entry gone", async () => {
    const q = queue();
    const k = queueKeys(q);
    const { job } = await backend.enqueue(q, { name: "stop" });
    await backend.cancel(q, job.id);
    expect(await redis.hmget(k.job(job.id), "state", "failedReason", "revoked")).toEqual(["failed", "revoked", "1"]);
    expect(await redis.xlen(k.stream)).toBe(0);
    expect((await backend.get(q, job.id))?.state).toBe("canceled");
  });

  it("glide-mq options this adapter cannot honour, tags and oversized data are refused before anything is written", async () => {
    const q = queue();
    const k = queueKeys(q);
    const producer = new GlideProducer(redis, q);
    await expect(producer.add("o", 1, { ordering: { key: "a" } })).rejects.toMatchObject({ code: "UNSUPPORTED" });
    await expect(producer.add("p", 1, { priority: 3000 })).rejects.toMatchObject({ code: "VALIDATION" });
    await expect(producer.add("i", 1, { jobId: "a:b" })).rejects.toMatchObject({ code: "VALIDATION" });
    await expect(backend.enqueue(q, { name: "t", tags: ["x"] })).rejects.toMatchObject({ code: "UNSUPPORTED" });
    await expect(backend.enqueue(q, { name: "big", data: "x".repeat(MAX_JOB_DATA_SIZE) })).rejects.toMatchObject({ code: "VALIDATION" });
    expect(await redis.exists(k.id, k.stream, k.events)).toBe(0);
  });
});

describe("glidemq-valkey: jobs a glide-mq producer wrote, read through the Backend", () => {
  it("gz: compressed data is read transparently", async () => {
    const q = queue();
    const id = await new GlideProducer(redis, q, { compression: "gzip" }).add("zip", { text: "a".repeat(200) });
    expect((await redis.hget(queueKeys(q).job(String(id)), "data"))?.startsWith("gz:")).toBe(true);
    expect((await backend.get(q, String(id)))?.data).toEqual({ text: "a".repeat(200) });
    expect((await backend.reserve(q, { worker: "w" }))[0]?.data).toEqual({ text: "a".repeat(200) });
  });

  it("reserve follows a glide-mq worker's order: priority list, then lifo list, then the stream", async () => {
    const q = queue();
    const producer = new GlideProducer(redis, q);
    const plain = await producer.add("plain", 1);
    const lifo1 = await producer.add("lifo1", 2, { lifo: true });
    const lifo2 = await producer.add("lifo2", 3, { lifo: true });
    const p5 = await producer.add("p5", 4, { priority: 5 });
    const p1 = await producer.add("p1", 5, { priority: 1 });
    const order = (await backend.reserve(q, { worker: "w", count: 5 })).map((j) => j.id);
    expect(order).toEqual([p1, p5, lifo2, lifo1, plain]);
    expect(await redis.get(queueKeys(q).listActive)).toBe("4");
  });

  it("a job whose ttl has passed is failed as expired instead of being handed out", async () => {
    const q = queue();
    const k = queueKeys(q);
    const producer = new GlideProducer(redis, q, { clock: () => Date.now() - 10_000 });
    const id = String(await producer.add("stale", 1, { ttl: 1000 }));
    expect(await backend.reserve(q, { worker: "w" })).toEqual([]);
    expect(await redis.hmget(k.job(id), "state", "failedReason")).toEqual(["failed", "expired"]);
  });

  it("complete() without a worker takes a job some other consumer claimed: its stream entry is found, acked and deleted", async () => {
    const q = queue();
    const k = queueKeys(q);
    await new GlideProducer(redis, q).add("elsewhere", 1);
    const consumer = new GlideConsumer(redis, q);
    const [claimed] = await consumer.reserve();
    const done = await backend.complete(q, claimed?.id ?? "");
    expect(done.state).toBe("completed");
    expect(await redis.xlen(k.stream)).toBe(0);
    expect(((await redis.xpending(k.stream, "workers")) as [number])[0]).toBe(0);
    expect(await redis.get(k.listActive)).toBeNull();
    await expect(backend.heartbeat(q, claimed?.id ?? "", { worker: "w" })).rejects.toMatchObject({ code: "LEASE_LOST" });
  });

  it("adds made in the same turn share one call: ids in call order, and a bad one is refused alone", async () => {
    const q = queue();
    const producer = new GlideProducer(redis, q);
    const calls = Array.from({ length: 50 }, (_, i) => producer.add("n", i));
    const bad = expect(producer.add("bad", 1, { priority: -1 })).rejects.toMatchObject({ code: "VALIDATION" });
    const dup = [producer.add("c", 1, { jobId: "same" }), producer.add("c", 2, { jobId: "same" })];
    expect(await Promise.all(calls)).toEqual(Array.from({ length: 50 }, (_, i) => String(i + 1)));
    await bad;
    expect(await Promise.all(dup)).toEqual(["same", null]);
    expect(await redis.xlen(queueKeys(q).stream)).toBe(51);
  });

  it("addFlow keeps a flow in one queue: a child in another queue or a nested flow is refused, nothing written", async () => {
    const q = queue();
    const producer = new GlideProducer(redis, q);
    await expect(producer.addFlow({ name: "p", children: [{ name: "c", queueName: "elsewhere" }] })).rejects.toMatchObject({
      code: "UNSUPPORTED",
    });
    await expect(producer.addFlow({ name: "p", children: [{ name: "c", children: [{ name: "g" }] }] })).rejects.toMatchObject({
      code: "UNSUPPORTED",
    });
    expect(await redis.exists(queueKeys(q).id)).toBe(0);
    const flow = await producer.addFlow({ name: "p", children: [{ name: "c1" }, { name: "c2", queueName: q }] });
    expect(flow).toEqual({ parent: "1", children: ["2", "3"] });
    expect((await backend.get(q, "1"))?.state).toBe("blocked");
    expect((await backend.get(q, "1"))?.dependsOn).toEqual(["2", "3"]);
  });

  it("a parent glide-mq's FlowProducer added counts and lists as blocked, as get() reads it, until a glide-mq worker releases it", async () => {
    const q = queue();
    const k = queueKeys(q);
    const flow = await new GlideProducer(redis, q).addFlow({ name: "p", children: [{ name: "c1" }, { name: "c2" }] });
    expect(await redis.zscore(k.blocked, flow!.parent)).toBeNull();
    expect((await backend.get(q, flow!.parent))?.state).toBe("blocked");
    expect(await backend.counts(q)).toMatchObject({ blocked: 1, waiting: 2 });
    expect((await backend.list(q, { state: "blocked" })).items.map((job) => job.id)).toEqual([flow!.parent]);
    // A glide-mq worker releases the parent itself, knowing nothing of sy:blocked.
    await redis.hset(k.job(flow!.parent), "state", "waiting");
    await redis.xadd(k.stream, "*", "jobId", flow!.parent, "name", "p");
    expect(await backend.counts(q)).toMatchObject({ blocked: 0, waiting: 3 });
    expect((await backend.list(q, { state: "blocked" })).items).toEqual([]);
  });

  it("a job reserved from the priority or lifo list announces `active` on the events stream, as glide-mq's Worker does; a stream job does not", async () => {
    const q = queue();
    const k = queueKeys(q);
    const producer = new GlideProducer(redis, q);
    const prioritized = await producer.add("p", 1, { priority: 3 });
    const plain = await producer.add("s", 2);
    const taken = await backend.reserve(q, { worker: "w", count: 2 });
    expect(taken.map((job) => job.id)).toEqual([prioritized, plain]);
    const active = (await redis.xrange(k.events, "-", "+")).filter(([, fields]) => fields[1] === "active").map(([, fields]) => fields[3]);
    expect(active).toEqual([prioritized]);
  });

  it("reserve() recovers a job that a consumer without a lease abandoned: one stall counted, then handed out again", async () => {
    const q = queue();
    const k = queueKeys(q);
    const recovering = createGlideMqBackend({ redis, stalledRecovery: { stalledInterval: 50, lockDuration: 1000 } });
    await new GlideProducer(redis, q).add("lost", 1);
    const dead = new GlideConsumer(redis, q, { clock: () => Date.now() - 5000 });
    const [claimed] = await dead.reserve();
    // XAUTOCLAIM measures a pending entry's idle time on the server's own clock: reserve until it counts as idle.
    const [again] = await eventually(async () => {
      const got = await recovering.reserve(q, { worker: "w" });
      return got.length > 0 ? got : undefined;
    }, "the pending entry to be idle long enough to reclaim");
    expect(again).toMatchObject({ id: claimed?.id, attempts: 2, lease: { worker: "w" } });
    expect(await redis.hget(k.job(claimed?.id ?? ""), "stalledCount")).toBe("1");
    const leased = await recovering.enqueue(q, { name: "leased" });
    await recovering.reserve(q, { worker: "w", leaseMs: 60_000 });
    await redis.hset(k.job(leased.job.id), "lastActive", String(Date.now() - 60_000));
    await untilPendingIdle(redis, k, 50); // idle past stalledInterval: XAUTOCLAIM would take it, were it not leased
    await recovering.close();
    const second = createGlideMqBackend({ redis, stalledRecovery: { stalledInterval: 50, lockDuration: 1000 } });
    expect(await second.reserve(q, { worker: "x" })).toEqual([]);
    expect((await second.get(q, leased.job.id))?.lease?.worker).toBe("w");
    await second.close();
  });

  it("our consumers honour meta.paused unless told to behave like glide-mq's workers", async () => {
    const q = queue();
    await new GlideProducer(redis, q).add("held", 1);
    await backend.pause(q);
    expect(await new GlideConsumer(redis, q).reserve()).toEqual([]);
    expect(await new GlideConsumer(redis, q, { honourPause: false }).reserve()).toHaveLength(1);
  });

  it("useGlideFunctions adds through glide-mq's FCALL only where its library is loaded, with the same job either way", async () => {
    const q = queue();
    const loaded = ((await redis.call("FUNCTION", "LIST", "LIBRARYNAME", "glidemq")) as unknown[]).length > 0;
    const producer = new GlideProducer(redis, q, { useGlideFunctions: true });
    const id = String(await producer.add("via", { n: 1 }, { attempts: 2 }));
    expect(producer.usedGlideFunctions).toBe(loaded);
    expect(await redis.hmget(queueKeys(q).job(id), "name", "data", "opts", "maxAttempts", "state")).toEqual([
      "via",
      '{"n":1}',
      '{"attempts":2}',
      "2",
      "waiting",
    ]);
  });

  it("dedup modes keep glide-mq's `<jobId>:<ms>` record in the dedup hash", async () => {
    const q = queue();
    const k = queueKeys(q);
    const producer = new GlideProducer(redis, q, { clock: () => 1_000 });
    const first = await producer.add("d", 1, { deduplication: { id: "X", mode: "throttle", ttl: 5000 } });
    expect(await producer.add("d", 2, { deduplication: { id: "X", mode: "throttle", ttl: 5000 } })).toBeNull();
    expect(await redis.hget(k.dedup, "X")).toBe(`${first}:1000`);
  });
});
