import type { EnqueueInput } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { usePrivateQless } from "./helpers/private-redis.js";

/**
 * switchyard.enqueue-many answers a job it created by its time field, and the Backend builds the job from
 * what it sent; concurrent single enqueues of a queue share script calls. These tests hold both
 * to what Redis holds afterwards. A private server, so that its command statistics are ours alone.
 */
const qless = usePrivateQless();
let seq = 0;
const queue = () => `ea-${process.pid}-${seq++}`;

/** Script calls the server has run since its statistics were last reset. */
async function scriptCalls(): Promise<number> {
  const stats = await qless.redis.info("commandstats");
  return [...stats.matchAll(/cmdstat_(?:fcall|evalsha):calls=(\d+)/g)].reduce((sum, [, calls]) => sum + Number(calls), 0);
}

const now = Date.now();
/** Every shape put writes differently: delays, priorities, tags, retries, meta (backoff, unique key, native), custom ids. */
const varied: EnqueueInput[] = [
  { name: "plain", data: { a: 1 } },
  { name: "delayed", data: "x", runAt: now + 61_234, priority: 7 },
  { name: "due already", data: null, runAt: now - 5_000 },
  { name: "prioritized", data: [1, 2], priority: -1_000_000 },
  { name: "tagged", data: 3, tags: ["a", "ünï ✓", "b/c"] },
  { name: "retrying", data: { b: true }, maxAttempts: 4, backoff: { type: "exponential", delay: 250 } },
  { name: "unique", data: 1, uniqueKey: "u-1" },
  { name: "extras", data: 3, native: { carried: { deep: [1] }, also: "x" } },
  { name: "unicode é ✓", data: { text: 'ünïcødé ✓ \u2028 "quoted" \\ /' } },
];

describe("qless-redis: the enqueue answer without a read-back, and group commit", () => {
  it("enqueueBulk answers each new job exactly as get() reads it, with the scheduled score and history qless wrote", async () => {
    const q = queue();
    const results = await qless.backend.enqueueBulk(q, [...varied, { name: "custom id", data: 0, id: `jid-${q}` }]);
    for (const { job, created } of results) {
      expect(created).toBe(true);
      expect(job).toStrictEqual(await qless.backend.get(q, job.id));
    }
    const delayed = results[1]?.job;
    expect(delayed?.state).toBe("delayed");
    expect(Number(await qless.redis.zscore(`ql:q:${q}-scheduled`, delayed?.id as string)) * 1000).toBeCloseTo(now + 61_234, 0);
    expect(results[2]?.job.state).toBe("waiting");
    expect(await qless.redis.hget(`ql:j:${results[0]?.job.id}`, "state")).toBe("waiting");
  });

  it("a job whose read-back differs from what was sent comes back from the script: a tracked jid, linked dependencies, a unique key already held", async () => {
    const q = queue();
    const [dependency] = await qless.backend.enqueueBulk(q, [{ name: "first", data: 1, uniqueKey: "held" }]);
    await qless.redis.zadd("ql:tracked", 1, `tracked-${q}`);
    const results = await qless.backend.enqueueBulk(q, [
      { name: "tracked", data: 1, id: `tracked-${q}` },
      { name: "blocked", data: 2, dependsOn: [dependency?.job.id as string, "no-such-job"] },
      { name: "duplicate", data: 3, uniqueKey: "held" },
    ]);
    expect((results[0]?.job.native.qless as { tracked: boolean }).tracked).toBe(true);
    expect(results[1]?.job.state).toBe("blocked");
    expect(results[1]?.job.dependsOn).toEqual([dependency?.job.id]);
    expect([results[2]?.created, results[2]?.job.id]).toEqual([false, dependency?.job.id]);
    for (const { job } of results) expect(job).toStrictEqual(await qless.backend.get(q, job.id));
  });

  it("concurrent enqueues of one queue share script calls; each caller gets its own job, and one refused fails alone", async () => {
    const q = queue();
    const elsewhere = queue();
    await qless.backend.enqueue(elsewhere, { name: "taken", data: 0, id: `taken-${q}` });
    const inputs: EnqueueInput[] = [
      ...Array.from({ length: 40 }, (_, i) => varied[i % varied.length] as EnqueueInput),
      { name: "jid of another queue", data: 1, id: `taken-${q}` },
    ];
    await qless.redis.config("RESETSTAT");
    const outcomes = await Promise.allSettled(inputs.map((input) => qless.backend.enqueue(q, input)));
    const calls = await scriptCalls();
    expect(outcomes.at(-1)).toMatchObject({ status: "rejected", reason: { name: "ConflictError" } });
    const results = outcomes.slice(0, 40).map((o) => {
      if (o.status !== "fulfilled") throw new Error(`an enqueue failed: ${String((o as PromiseRejectedResult).reason)}`);
      return o.value;
    });
    // The unique key u-1 is taken by the first of its four enqueues; the others answer that job.
    expect(results.filter((r) => r.created).length).toBe(37);
    expect(new Set(results.map((r) => r.job.id)).size).toBe(37);
    results.forEach((r, i) => expect(r.job.name).toBe(inputs[i]?.name));
    for (const { job } of results) expect(job).toStrictEqual(await qless.backend.get(q, job.id));
    expect(await qless.redis.zcard(`ql:q:${q}-work`)).toBe(32);
    expect(await qless.redis.zcard(`ql:q:${q}-scheduled`)).toBe(5);
    expect(await qless.redis.hget(`ql:j:taken-${q}`, "queue")).toBe(elsewhere);
    // One call for the first, one for the rest, then (refused as a whole) the rest one by one.
    expect(calls).toBeGreaterThan(1);
    expect(calls).toBeLessThan(inputs.length + 3);
  });

  it("without a refusal, thirty-six concurrent enqueues take at most two script calls", async () => {
    const q = queue();
    await qless.redis.config("RESETSTAT");
    const results = await Promise.all(
      varied.concat(varied, varied, varied).map((input) => qless.backend.enqueue(q, { ...input, uniqueKey: undefined })),
    );
    expect(await scriptCalls()).toBeLessThanOrEqual(2);
    expect(results.every((r) => r.created)).toBe(true);
    expect(await qless.redis.zcard(`ql:q:${q}-work`)).toBe(32);
    expect(await qless.redis.zcard(`ql:q:${q}-scheduled`)).toBe(4);
  });
});
