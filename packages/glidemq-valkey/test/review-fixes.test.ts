import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { serviceUrl } from "@switchyard/conformance";
import type { Job } from "@switchyard/core";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { GlideConsumer } from "../src/consumer.js";
import { createGlideMqBackend } from "../src/index.js";
import { queueKeys } from "../src/keys.js";
import { removeQueues } from "./support/cleanup.js";

/** Rules a review found broken; db 4 (glide-mq conformance), random queue names, keys removed after. */
const url = `${serviceUrl("redis")}/4`;
const probe = new Redis(url);
const used = new Set<string>();
const newQueue = () => {
  const name = `review-${randomBytes(4).toString("hex")}`;
  used.add(name);
  return name;
};
afterAll(async () => {
  await removeQueues(probe, used);
  await probe.quit();
});

const FAST_RECOVERY = { interval: 0, stalledInterval: 50, lockDuration: 50, maxStalledCount: 5 };

async function reserveWithin(backend: ReturnType<typeof createGlideMqBackend>, queue: string, tries: number): Promise<Job[]> {
  for (let i = 0; i < tries; i++) {
    const got = await backend.reserve(queue, { worker: "live", leaseMs: 60_000 });
    if (got.length > 0) return got;
    await sleep(60);
  }
  return [];
}

describe("glidemq-valkey: a Switchyard lease ends when glide-mq requeues or re-activates the job", () => {
  for (const priority of [0, 5]) {
    const source = priority === 0 ? "stream" : "priority list";
    it(`a ${source} job requeued by glide-mq's stalled recovery loses its lease fields, and is recovered once a glide-mq worker that claimed it dies`, async () => {
      const backend = createGlideMqBackend({ url }, { stalledRecovery: FAST_RECOVERY });
      const client = new Redis(url);
      try {
        await backend.ready();
        const queue = newQueue();
        const keys = queueKeys(queue);
        const { job } = await backend.enqueue(queue, { name: "a", data: 1, maxAttempts: 5, priority });
        await backend.reserve(queue, { worker: "dead-switchyard-worker", leaseMs: 60_000 });
        const glide = new GlideConsumer(client, queue, { stalledInterval: 50, lockDuration: 50, maxStalledCount: 5 });
        await sleep(80);
        expect(await glide.reclaimStalled()).toBeGreaterThan(0);
        // Native store: the requeued job carries no Switchyard lease any more.
        expect(await probe.hmget(keys.job(job.id), "syWorker", "syLeaseUntil", "syLeaseStart", "syEntryId")).toEqual([
          null,
          null,
          null,
          null,
        ]);
        expect(await probe.zscore(keys.leases, job.id)).toBeNull();
        const claimed = await glide.reserve(1);
        expect(claimed[0]?.id).toBe(job.id);
        expect((await backend.get(queue, job.id))?.lease?.worker).toBe("glide-mq worker");
        await sleep(120);
        const recovered = await reserveWithin(backend, queue, 5);
        expect(recovered.map((j) => j.id)).toEqual([job.id]);
      } finally {
        client.disconnect();
        await backend.close();
      }
    });
  }

  it("a job a glide-mq worker re-activated (new processedOn, old sy* fields left) is not shown as Switchyard-leased and is recovered when it stalls", async () => {
    const backend = createGlideMqBackend({ url }, { stalledRecovery: FAST_RECOVERY });
    try {
      await backend.ready();
      const queue = newQueue();
      const keys = queueKeys(queue);
      const { job } = await backend.enqueue(queue, { name: "a", data: 1, maxAttempts: 5 });
      const [held] = await backend.reserve(queue, { worker: "old-holder", leaseMs: 60_000 });
      expect(held?.lease?.worker).toBe("old-holder");
      // What glide-mq's own moveToActive writes on a re-activation: processedOn/lastActive, no sy* cleanup.
      const later = String(Number(await probe.hget(keys.job(job.id), "processedOn")) + 7);
      await probe.hset(keys.job(job.id), "processedOn", later, "lastActive", later);
      expect((await backend.get(queue, job.id))?.lease?.worker).toBe("glide-mq worker");
      await sleep(120);
      const recovered = await reserveWithin(backend, queue, 5);
      expect(recovered.map((j) => j.id)).toEqual([job.id]);
    } finally {
      await backend.close();
    }
  });
});

describe("glidemq-valkey: maxAttempts bounds the handouts, expired leases included", () => {
  it("a job whose first lease ran out and whose second run fails is failed for good at maxAttempts 2, never handed out a third time", async () => {
    const backend = createGlideMqBackend({ url }, { stalledRecovery: false });
    try {
      await backend.ready();
      const queue = newQueue();
      const { job } = await backend.enqueue(queue, { name: "a", data: 1, maxAttempts: 2 });
      const [first] = await backend.reserve(queue, { worker: "w1", leaseMs: 30 });
      expect(first?.attempts).toBe(1);
      await sleep(60);
      const [second] = await backend.reserve(queue, { worker: "w2", leaseMs: 30_000 });
      expect(second?.id).toBe(job.id);
      expect(second?.attempts).toBe(2);
      const afterFail = await backend.fail(queue, job.id, { worker: "w2", error: { message: "boom" } });
      expect(afterFail.state).toBe("failed");
      expect(await probe.zscore(queueKeys(queue).failed, job.id)).not.toBeNull();
      expect(await probe.zscore(queueKeys(queue).scheduled, job.id)).toBeNull();
      expect(await backend.reserve(queue, { worker: "w3", leaseMs: 30_000 })).toHaveLength(0);
    } finally {
      await backend.close();
    }
  });

  it("a GlideConsumer keeps glide-mq's rule: a stall does not use up one of opts.attempts on fail", async () => {
    const client = new Redis(url);
    try {
      const queue = newQueue();
      const keys = queueKeys(queue);
      const backend = createGlideMqBackend({ redis: client }, { stalledRecovery: false });
      const { job } = await backend.enqueue(queue, { name: "a", data: 1, maxAttempts: 2 });
      await probe.hset(keys.job(job.id), "stalledCount", "1");
      const glide = new GlideConsumer(client, queue);
      const [claimed] = await glide.reserve(1);
      expect(claimed?.id).toBe(job.id);
      expect(await glide.fail(claimed!, "boom")).toBe("retrying");
    } finally {
      client.disconnect();
    }
  });
});
