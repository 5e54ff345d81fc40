import { randomUUID } from "node:crypto";
import { eventually } from "@switchyard/conformance";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { GlideConsumer, GlideProducer, GlideWorker, UNRECOVERABLE, jobCounts, queueKeys, setPaused } from "../src/index.js";
import { removeQueues } from "./support/cleanup.js";
import { watchCommands } from "./support/monitor.js";

const url = `${serviceUrl("redis")}/4`;
let redis: Redis;
const used = new Set<string>();
const queue = () => {
  const name = `wk-${randomUUID().slice(0, 8)}`;
  used.add(name);
  return name;
};

beforeAll(() => {
  redis = new Redis(url);
});
afterAll(async () => {
  await removeQueues(redis, used);
  await redis.quit();
});

describe("glidemq-valkey: GlideWorker", () => {
  it("processes every job once at concurrency 10, leaving glide-mq's bookkeeping balanced", async () => {
    const q = queue();
    const k = queueKeys(q);
    const producer = new GlideProducer(redis, q);
    await producer.addBulk(
      Array.from({ length: 200 }, (_, i) => ({ name: "n", data: i, ...(i % 10 === 0 ? { opts: { priority: 3 } } : {}) })),
    );
    const seen: number[] = [];
    const worker = new GlideWorker(redis, q, (job) => seen.push(job.data as number), {
      concurrency: 10,
      promotionInterval: 50,
      blockTimeout: 200,
    });
    await worker.start();
    await eventually(async () => (await jobCounts(redis, k)).completed === 200, "200 completions");
    await worker.close();
    expect(new Set(seen).size).toBe(200);
    expect(seen).toHaveLength(200);
    expect(await jobCounts(redis, k)).toEqual({ waiting: 0, active: 0, delayed: 0, completed: 200, failed: 0 });
    expect(await redis.get(k.listActive)).toBe("0");
    expect(await redis.xlen(k.stream)).toBe(0);
    expect(await redis.exists(k.worker(worker.consumer.consumerId))).toBe(0);
  });

  it("completeMany completes each job as a single completion would and claims as many next jobs; a job not active is refused alone", async () => {
    const q = queue();
    const k = queueKeys(q);
    await new GlideProducer(redis, q).addBulk(Array.from({ length: 6 }, (_, i) => ({ name: "b", data: i })));
    const consumer = new GlideConsumer(redis, q);
    await consumer.init();
    const first = await consumer.reserve(3);
    const { statuses, next } = await consumer.completeMany(
      [...first.map((job) => ({ job, result: { id: job.id } })), { job: { id: "5", entryId: "" }, result: null }],
      3,
    );
    expect(statuses).toEqual(["OK", "OK", "OK", "INVALID_STATE"]);
    expect(next.map((j) => j.id)).toEqual(["4", "5", "6"]);
    for (const job of first) {
      expect(await redis.hmget(k.job(job.id), "state", "returnvalue")).toEqual(["completed", JSON.stringify({ id: job.id })]);
    }
    expect(await redis.zcard(k.completed)).toBe(3);
    expect(((await redis.xpending(k.stream, "workers")) as [number])[0]).toBe(3);
  });

  it("a stalled job claimed from the lifo list goes back to it with stalledCount 1, and fails on its second stall", async () => {
    const q = queue();
    const k = queueKeys(q);
    const id = String(await new GlideProducer(redis, q).add("l", 1, { lifo: true }));
    const holder = new GlideConsumer(redis, q);
    expect((await holder.reserve())[0]?.id).toBe(id);
    expect(await redis.get(k.listActive)).toBe("1");
    const later = new GlideConsumer(redis, q, { lockDuration: 1000, clock: () => Date.now() + 5000 });
    await later.reclaimStalled();
    expect(await redis.hmget(k.job(id), "state", "stalledCount")).toEqual(["waiting", "1"]);
    expect(await redis.lrange(k.lifo, 0, -1)).toEqual([id]);
    expect(await redis.get(k.listActive)).toBe("0");
    await holder.reserve();
    await later.reclaimStalled();
    expect(await redis.hmget(k.job(id), "state", "failedReason")).toEqual(["failed", "job stalled more than maxStalledCount"]);
    expect(await redis.get(k.listActive)).toBe("0");
  });

  it("retries with the job's backoff, and an UnrecoverableError fails at once", async () => {
    const q = queue();
    const k = queueKeys(q);
    const producer = new GlideProducer(redis, q);
    const flaky = String(await producer.add("flaky", 1, { attempts: 3, backoff: { type: "fixed", delay: 20 } }));
    const fatal = String(await producer.add("fatal", 2, { attempts: 3 }));
    const worker = new GlideWorker(
      redis,
      q,
      (job) => {
        if (job.name === "fatal") throw Object.assign(new Error("no way"), { name: UNRECOVERABLE });
        if (job.attemptsMade < 2) throw new Error(`try ${job.attemptsMade}`);
        return "ok";
      },
      { promotionInterval: 20, blockTimeout: 100 },
    );
    await worker.start();
    await eventually(async () => (await redis.hget(k.job(flaky), "state")) === "completed", "the flaky job to complete");
    await worker.close();
    expect(await redis.hmget(k.job(flaky), "attemptsMade", "returnvalue")).toEqual(["2", '"ok"']);
    expect(await redis.hmget(k.job(fatal), "state", "attemptsMade", "failedReason")).toEqual(["failed", "1", "no way"]);
  });

  it('a job that outruns opts.timeout fails with glide-mq\'s "Job timeout exceeded"', async () => {
    const q = queue();
    const k = queueKeys(q);
    const id = String(await new GlideProducer(redis, q).add("slow", 1, { timeout: 50 }));
    const worker = new GlideWorker(redis, q, () => new Promise((resolve) => setTimeout(resolve, 2000)), { blockTimeout: 100 });
    await worker.start();
    await eventually(async () => (await redis.hget(k.job(id), "state")) === "failed", "the timed-out job to fail");
    expect(await redis.hget(k.job(id), "failedReason")).toBe("Job timeout exceeded");
    await worker.close();
  });

  it("claims nothing while meta.paused is 1, and resumes when it is cleared", async () => {
    const q = queue();
    const k = queueKeys(q);
    await setPaused(redis, k, true);
    await new GlideProducer(redis, q).add("wait", 1);
    let ran = 0;
    const pauseChecks = await watchCommands(
      redis,
      ([command, key, field]) => command?.toLowerCase() === "hget" && key === k.meta && field === "paused",
    );
    const worker = new GlideWorker(redis, q, () => ran++, { promotionInterval: 20, blockTimeout: 100 });
    await worker.start();
    // Two looks at meta.paused: the worker has come round its claim loop twice and claimed nothing.
    await eventually(async () => pauseChecks.count() >= 2, "the worker to look at meta.paused twice");
    pauseChecks.stop();
    expect(ran).toBe(0);
    await setPaused(redis, k, false);
    await eventually(async () => ran === 1, "the job after resume");
    await worker.close();
    expect((await jobCounts(redis, k)).completed).toBe(1);
  });
});
