import { randomBytes } from "node:crypto";
import { type Socket, connect, createServer } from "node:net";
import { eventually } from "@switchyard/conformance";
import { BackendUnavailableError, type Job } from "@switchyard/core";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { GlideConsumer } from "../src/consumer.js";
import { createGlideMqBackend } from "../src/index.js";
import { PRIORITY_SHIFT, queueKeys } from "../src/keys.js";
import { jobCounts } from "../src/queue-admin.js";
import { removeQueues } from "./support/cleanup.js";

/** Where Switchyard leases, attempts, export and counts meet glide-mq's own workers and layout; db 4, random queue names, keys removed after. */
const url = `${serviceUrl("redis")}/4`;
const probe = new Redis(url);
const used = new Set<string>();
const newQueue = () => {
  const name = `interplay-${randomBytes(4).toString("hex")}`;
  used.add(name);
  return name;
};
afterAll(async () => {
  await removeQueues(probe, used);
  await probe.quit();
});

const FAST_RECOVERY = { interval: 0, stalledInterval: 50, lockDuration: 50, maxStalledCount: 5 };

/** Reserves until the backend hands a job out (its lock lapsed and recovery ran), failing after the deadline. */
async function reserveOnceRecovered(backend: ReturnType<typeof createGlideMqBackend>, queue: string): Promise<Job[]> {
  return eventually(async () => {
    const got = await backend.reserve(queue, { worker: "live", leaseMs: 60_000 });
    return got.length > 0 ? got : undefined;
  }, "the abandoned job to be recovered and reserved");
}

describe("glidemq-valkey: a Switchyard lease ends when glide-mq requeues or re-activates the job", () => {
  for (const priority of [0, 5]) {
    const source = priority === 0 ? "stream" : "priority list";
    it(`a ${source} job requeued by glide-mq's stalled recovery loses its lease fields, and is recovered once a glide-mq worker that claimed it dies`, async () => {
      const backend = createGlideMqBackend({ url, stalledRecovery: FAST_RECOVERY });
      const client = new Redis(url);
      try {
        await backend.ready();
        const queue = newQueue();
        const keys = queueKeys(queue);
        const { job } = await backend.enqueue(queue, { name: "a", data: 1, maxAttempts: 5, priority });
        await backend.reserve(queue, { worker: "dead-switchyard-worker", leaseMs: 60_000 });
        const glide = new GlideConsumer(client, queue, { stalledInterval: 50, lockDuration: 50, maxStalledCount: 5 });
        await eventually(async () => (await glide.reclaimStalled()) > 0, "glide-mq's stalled check to requeue the job");
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
        const recovered = await reserveOnceRecovered(backend, queue);
        expect(recovered.map((j) => j.id)).toEqual([job.id]);
      } finally {
        client.disconnect();
        await backend.close();
      }
    });
  }

  it("a job a glide-mq worker re-activated (new processedOn, old sy* fields left) is not shown as Switchyard-leased and is recovered when it stalls", async () => {
    const backend = createGlideMqBackend({ url, stalledRecovery: FAST_RECOVERY });
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
      const recovered = await reserveOnceRecovered(backend, queue);
      expect(recovered.map((j) => j.id)).toEqual([job.id]);
    } finally {
      await backend.close();
    }
  });
});

describe("glidemq-valkey: maxAttempts bounds the handouts, expired leases included", () => {
  it("a job whose first lease ran out and whose second run fails is failed for good at maxAttempts 2, never handed out a third time", async () => {
    const backend = createGlideMqBackend({ url, stalledRecovery: false });
    try {
      await backend.ready();
      const queue = newQueue();
      const { job } = await backend.enqueue(queue, { name: "a", data: 1, maxAttempts: 2 });
      const [first] = await backend.reserve(queue, { worker: "w1", leaseMs: 30 });
      expect(first?.attempts).toBe(1);
      const [second] = await eventually(async () => {
        const got = await backend.reserve(queue, { worker: "w2", leaseMs: 30_000 });
        return got.length > 0 ? got : undefined;
      }, "the 30 ms lease to run out and the job to be handed out again");
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
      const backend = createGlideMqBackend({ redis: client, stalledRecovery: false });
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

async function exportAllPages(
  backend: ReturnType<typeof createGlideMqBackend>,
  queue: string,
  limit: number,
  between?: () => Promise<void>,
) {
  const pages: string[][] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 1000; i++) {
    const page = await backend.export(queue, cursor === undefined ? { limit } : { limit, cursor });
    pages.push(page.items.map((j) => j.id));
    if (page.cursor === null) return pages;
    cursor = page.cursor;
    if (i === 0 && between) await between();
  }
  throw new Error("export() never returned a null cursor");
}

describe("glidemq-valkey: export() pages by SCAN of the job hashes", () => {
  it("a job that a glide-mq worker's promotion moves from `scheduled` to the priority list between two pages is still exported", async () => {
    const backend = createGlideMqBackend({ url, stalledRecovery: false });
    const client = new Redis(url);
    try {
      await backend.ready();
      const queue = newQueue();
      const w = (await backend.enqueue(queue, { name: "w", data: 1 })).job;
      const x = (await backend.enqueue(queue, { name: "x", data: 1, priority: 5, delay: 100 })).job;
      const z = (await backend.enqueue(queue, { name: "z", data: 1, delay: 60_000 })).job;
      const pages = await exportAllPages(backend, queue, 2, async () => {
        // The delayed job becomes due after 100 ms; glide-mq's promotion then moves it.
        const consumer = new GlideConsumer(client, queue);
        await eventually(async () => (await consumer.promote()) === 1, "glide-mq to promote the due job");
        expect(await probe.lrange(queueKeys(queue).priority, 0, -1)).toEqual([x.id]);
      });
      expect([...new Set(pages.flat())].sort()).toEqual([w.id, x.id, z.id].sort());
    } finally {
      client.disconnect();
      await backend.close();
    }
  });

  it("pages hold at most `limit` jobs, never one id twice, and together every job of the queue (and no other key)", async () => {
    const backend = createGlideMqBackend({ url, stalledRecovery: false });
    try {
      await backend.ready();
      const queue = newQueue();
      const created = await backend.enqueueBulk(
        queue,
        Array.from({ length: 25 }, (_, i) => ({ name: `j${i}`, data: i, ...(i % 3 === 1 ? { delay: 60_000 } : {}) })),
      );
      const ids = created.map((r) => r.job.id);
      // A non-hash key under job: must not break the export or appear in it.
      await probe.set(`${queueKeys(queue).job(ids[0]!)}:logs`, "x");
      for (const limit of [1, 3, 100]) {
        const pages = await exportAllPages(backend, queue, limit);
        for (const page of pages) {
          expect(page.length).toBeLessThanOrEqual(limit);
          expect(new Set(page).size).toBe(page.length);
        }
        expect([...new Set(pages.flat())].sort()).toEqual([...ids].sort());
      }
    } finally {
      await backend.close();
    }
  });

  it("an active job a glide-mq consumer claimed from the priority list (in no Switchyard index) is exported", async () => {
    const backend = createGlideMqBackend({ url, stalledRecovery: false });
    const client = new Redis(url);
    try {
      await backend.ready();
      const queue = newQueue();
      const { job } = await backend.enqueue(queue, { name: "p", data: 1, priority: 3 });
      const glide = new GlideConsumer(client, queue);
      await glide.promote();
      expect((await glide.reserve(1))[0]?.id).toBe(job.id);
      const page = await backend.export(queue, { limit: 10 });
      expect(page.items.map((j) => [j.id, j.state])).toEqual([[job.id, "active"]]);
      expect(page.cursor).toBeNull();
    } finally {
      client.disconnect();
      await backend.close();
    }
  });
});

describe("glidemq-valkey: a connection lost after ready() is a typed error on every operation", () => {
  it("once the server goes away, reserve/get/counts/list/export/enqueue/complete reject with BackendUnavailableError carrying the ioredis error as cause", async () => {
    const target = new URL(serviceUrl("redis"));
    const sockets = new Set<Socket>();
    const proxy = createServer((downstream) => {
      const upstream = connect(Number(target.port), target.hostname);
      sockets.add(downstream).add(upstream);
      downstream.pipe(upstream).pipe(downstream);
      downstream.on("error", () => {});
      upstream.on("error", () => {});
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const port = (proxy.address() as { port: number }).port;
    const backend = createGlideMqBackend({
      url: `redis://127.0.0.1:${port}/4`,
      redisOptions: { maxRetriesPerRequest: 0, retryStrategy: () => null },
      stalledRecovery: false,
    });
    try {
      await backend.ready();
      const queue = newQueue();
      const { job } = await backend.enqueue(queue, { name: "a", data: 1 });
      expect(await probe.exists(queueKeys(queue).job(job.id))).toBe(1);
      proxy.close();
      for (const socket of sockets) socket.destroy();
      await eventually(
        async () =>
          backend.get(queue, job.id).then(
            () => false,
            () => true,
          ),
        "the backend to notice the lost connection",
      );
      const operations: Array<[string, () => Promise<unknown>]> = [
        ["reserve", () => backend.reserve(queue, { worker: "w" })],
        ["get", () => backend.get(queue, job.id)],
        ["counts", () => backend.counts(queue)],
        ["list", () => backend.list(queue, { state: "waiting" })],
        ["export", () => backend.export(queue)],
        ["enqueue", () => backend.enqueue(queue, { name: "b", data: 2 })],
        ["complete", () => backend.complete(queue, job.id)],
      ];
      for (const [name, run] of operations) {
        const error = await run().then(
          () => new Error(`${name} succeeded`),
          (e: unknown) => e,
        );
        expect(error, name).toBeInstanceOf(BackendUnavailableError);
        expect((error as BackendUnavailableError).code, name).toBe("BACKEND_UNAVAILABLE");
        expect((error as Error).cause, name).toBeInstanceOf(Error);
      }
      // Nothing was written by the refused enqueue.
      expect(await probe.hlen(queueKeys(queue).job(String(Number(job.id) + 1)))).toBe(0);
    } finally {
      await backend.close();
    }
  });
});

describe("glidemq-valkey: counts() agree with get() and list()", () => {
  it("a prioritized job (in `scheduled` at exactly its band's score) counts as waiting, a delayed one as delayed; glide-mq's jobCounts still say delayed", async () => {
    const backend = createGlideMqBackend({ url, stalledRecovery: false });
    try {
      await backend.ready();
      const queue = newQueue();
      const keys = queueKeys(queue);
      const prioritized = (await backend.enqueue(queue, { name: "p", data: 1, priority: 5 })).job;
      const other = (await backend.enqueue(queue, { name: "q", data: 1, priority: 2000 })).job;
      const delayed = (await backend.enqueue(queue, { name: "d", data: 1, priority: 5, delay: 60_000 })).job;
      const plain = (await backend.enqueue(queue, { name: "w", data: 1 })).job;
      const bandScore = Number(await probe.zscore(keys.scheduled, prioritized.id));
      expect(bandScore % PRIORITY_SHIFT).toBe(0);
      expect(bandScore).toBeGreaterThan(0);
      expect(Number(await probe.zscore(keys.scheduled, delayed.id)) % PRIORITY_SHIFT).toBeGreaterThan(0);
      expect((await backend.get(queue, prioritized.id))?.state).toBe("waiting");
      expect((await backend.get(queue, other.id))?.state).toBe("waiting");
      const waitingIds = (await backend.list(queue, { state: "waiting" })).items.map((j) => j.id).sort();
      expect(waitingIds).toEqual([prioritized.id, other.id, plain.id].sort());
      const counts = await backend.counts(queue);
      expect(counts.waiting).toBe(3);
      expect(counts.delayed).toBe(1);
      expect(await jobCounts(probe, keys)).toMatchObject({ waiting: 1, delayed: 3 });
    } finally {
      await backend.close();
    }
  });
});
