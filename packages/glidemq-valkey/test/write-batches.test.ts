import { randomUUID } from "node:crypto";
import type { EnqueueInput } from "@switchyard/core";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { createGlideMqBackend, queueKeys } from "../src/index.js";
import { removeQueues } from "./support/cleanup.js";
import { watchCommands } from "./support/monitor.js";

/**
 * The add and completion scripts return less than the whole job (new jobs come back as ids, finished
 * jobs as their hash before completion) and write what many jobs share once per call; the Backend
 * builds the rest. These tests hold the answers to what Redis then holds.
 */
const url = `${serviceUrl("redis")}/4`;
let redis: Redis;
const backend = createGlideMqBackend({ url });
const used = new Set<string>();
const queue = () => {
  const name = `wb-${randomUUID().slice(0, 8)}`;
  used.add(name);
  return name;
};

beforeAll(() => {
  redis = new Redis(url);
});
afterAll(async () => {
  await backend.close();
  await removeQueues(redis, used);
  await redis.quit();
});

const now = Date.now();
/** Every shape createJob writes differently: delays, priorities (one beyond glide-mq's scale), lifo, ttl, extras. */
const varied: EnqueueInput[] = [
  { name: "plain", data: { a: 1 } },
  { name: "delayed", data: "x", runAt: now + 60_000, priority: 7 },
  { name: "prioritized", data: [1, 2], priority: 2047 },
  { name: "clamped", data: null, priority: 5000 },
  { name: "retrying", data: { b: true }, maxAttempts: 4, backoff: { type: "exponential", delay: 250 } },
  { name: "extras", data: 3, native: { carried: { deep: [1] }, also: "x" } },
  { name: "native opts", data: {}, native: { opts: { lifo: true, ttl: 60_000, attempts: 2 } } },
  { name: "unicode é ✓", data: { text: "ünïcødé ✓ \u2028" } },
];

describe("glidemq-valkey: what the add and completion scripts no longer read back", () => {
  it("enqueueBulk answers each new job exactly as get() reads it, and the ids taken at once leave the counter as one INCR per job would", async () => {
    const q = queue();
    const before = Number(await redis.get(queueKeys(q).id)) || 0;
    const results = await backend.enqueueBulk(q, varied);
    for (const { job, created } of results) {
      expect(created).toBe(true);
      expect(job).toEqual(await backend.get(q, job.id));
    }
    expect(results.map((r) => Number(r.job.id))).toEqual(varied.map((_, i) => before + i + 1));
    expect(Number(await redis.get(queueKeys(q).id))).toBe(before + varied.length);
  });

  it("a bulk with unique keys or custom ids takes ids one by one: a skipped job takes none", async () => {
    const q = queue();
    const results = await backend.enqueueBulk(q, [
      { name: "a", data: 1, uniqueKey: "u" },
      { name: "b", data: 2, uniqueKey: "u" },
      { name: "c", data: 3 },
      { name: "d", data: 4, id: "custom" },
    ]);
    expect(results.map((r) => [r.job.id, r.created])).toEqual([
      ["1", true],
      ["1", false],
      ["2", true],
      ["custom", true],
    ]);
    expect(await redis.get(queueKeys(q).id)).toBe("2");
    for (const { job } of results) expect(job).toEqual(await backend.get(q, job.id));
  });

  it("concurrent enqueues of one queue share script calls; each caller gets its own job, and one refused fails alone", async () => {
    const q = queue();
    const k = queueKeys(q);
    const adds = await watchCommands(redis, ([command, , , first]) => command?.toLowerCase() === "evalsha" && first === k.id);
    const inputs: EnqueueInput[] = [
      ...Array.from({ length: 40 }, (_, i) => varied[i % varied.length] as EnqueueInput),
      { name: "tagged", data: 1, tags: ["t"] },
      { name: "orphan", data: 1, dependsOn: ["no-such-job"] },
    ];
    const outcomes = await Promise.allSettled(inputs.map((input) => backend.enqueue(q, input)));
    adds.stop();
    expect(outcomes.slice(40).map((o) => o.status)).toEqual(["rejected", "rejected"]);
    const jobs = outcomes.slice(0, 40).map((o) => {
      if (o.status !== "fulfilled") throw new Error(`an enqueue failed: ${String((o as PromiseRejectedResult).reason)}`);
      return o.value.job;
    });
    expect(new Set(jobs.map((job) => job.id)).size).toBe(40);
    jobs.forEach((job, i) => expect(job.name).toBe(inputs[i]?.name));
    for (const job of jobs) expect(job).toEqual(await backend.get(q, job.id));
    expect(adds.count()).toBeGreaterThan(0);
    expect(adds.count()).toBeLessThan(40);
  });

  it("completions that share a call: each answer is the job as get() reads it after, the lease fields gone, and the metrics count every job", async () => {
    const q = queue();
    const k = queueKeys(q);
    await backend.enqueueBulk(
      q,
      Array.from({ length: 30 }, (_, i) => ({ name: "n", data: i })),
    );
    const held = await Promise.all(Array.from({ length: 30 }, (_, n) => backend.reserve(q, { worker: `w${n}` })));
    const completed = await Promise.all(
      held.map(([job], n) => {
        if (!job) throw new Error("every worker got a job");
        return backend.complete(q, job.id, { worker: `w${n}`, result: { n, ok: "✓" } });
      }),
    );
    for (const job of completed) {
      expect(job.state).toBe("completed");
      expect(job).toEqual(await backend.get(q, job.id));
      expect(Object.keys(await redis.hgetall(k.job(job.id))).filter((field) => /^sy[A-Z]/.test(field))).toEqual([]);
    }
    expect(await redis.zcard(k.completed)).toBe(30);
    expect(await redis.zcard(k.leases)).toBe(0);
    expect(await redis.xlen(k.stream)).toBe(0);
    expect((await redis.xpending(k.stream, "workers"))[0]).toBe(0);
    const buckets = await redis.hgetall(k.metricsCompleted);
    const counted = Object.entries(buckets)
      .filter(([field]) => field.endsWith(":c"))
      .reduce((sum, [, value]) => sum + Number(value), 0);
    expect(counted).toBe(30);
  });
});
