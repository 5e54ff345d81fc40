import { randomUUID } from "node:crypto";
import { completeAndReserve } from "@switchyard/core";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { GlideProducer, createGlideMqBackend, queueKeys } from "../src/index.js";
import { removeQueues } from "./support/cleanup.js";
import { watchCommands } from "./support/monitor.js";

const url = `${serviceUrl("redis")}/4`;
let redis: Redis;
const backend = createGlideMqBackend({ url });
const used = new Set<string>();
const queue = () => {
  const name = `cb-${randomUUID().slice(0, 8)}`;
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

describe("glidemq-valkey: completions of one queue go to Redis together", () => {
  it("20 workers chaining completeAndReserve over 400 jobs: each job completed once, each next job leased to the worker that asked, in fewer script calls than jobs", async () => {
    const q = queue();
    const k = queueKeys(q);
    await new GlideProducer(redis, q).addBulk(Array.from({ length: 400 }, (_, i) => ({ name: "n", data: i })));
    const batched = await watchCommands(
      redis,
      ([command, , , first, second]) => command?.toLowerCase() === "evalsha" && first === k.stream && second === k.meta,
    );
    const completedBy = new Map<string, string>();
    await Promise.all(
      Array.from({ length: 20 }, async (_, n) => {
        const worker = `w${n}`;
        let [job] = await backend.reserve(q, { worker });
        while (job) {
          expect(job.lease?.worker).toBe(worker);
          // The store agrees: the hash names this worker as the lease holder.
          expect(await redis.hget(k.job(job.id), "syWorker")).toBe(worker);
          const { completed, next } = await completeAndReserve(backend, q, job.id, { worker, result: n }, { worker });
          expect(completed).toMatchObject({ id: job.id, state: "completed", result: n, lease: null });
          expect(completedBy.has(job.id)).toBe(false);
          completedBy.set(job.id, worker);
          [job] = next;
        }
      }),
    );
    batched.stop();
    expect(completedBy.size).toBe(400);
    expect(await redis.zcard(k.completed)).toBe(400);
    expect(await redis.zcard(k.leases)).toBe(0);
    expect((await backend.counts(q)).active).toBe(0);
    // Every completion went through the batched script, and calls carried several of them.
    expect(batched.count()).toBeGreaterThan(0);
    expect(batched.count()).toBeLessThan(400);
  });

  it("a refused completion in a batch fails alone: the others of the same call complete", async () => {
    const q = queue();
    await new GlideProducer(redis, q).addBulk(Array.from({ length: 3 }, (_, i) => ({ name: "n", data: i })));
    const [a, b, c] = await backend.reserve(q, { worker: "holder", count: 3 });
    if (!a || !b || !c) throw new Error("three jobs were reserved");
    const outcomes = await Promise.allSettled([
      backend.complete(q, a.id, { worker: "holder" }),
      backend.complete(q, b.id, { worker: "intruder" }),
      backend.complete(q, c.id, { worker: "holder" }),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: "LEASE_LOST" });
    expect(await redis.hget(queueKeys(q).job(b.id), "state")).toBe("active");
    expect((await backend.counts(q)).completed).toBe(2);
  });

  it("a job this Backend reserved completes without its hash read back, answering what a read-back would; another run's copy is not used", async () => {
    const q = queue();
    const k = queueKeys(q);
    await new GlideProducer(redis, q).addBulk(Array.from({ length: 3 }, (_, i) => ({ name: "n", data: { i } })));
    const [plain, beaten, lapsed] = await backend.reserve(q, { worker: "w", count: 3, leaseMs: 60_000 });
    if (!plain || !beaten || !lapsed) throw new Error("three jobs were reserved");
    // A heartbeat's progress is in the copy the completion answers from.
    await backend.heartbeat(q, beaten.id, { worker: "w", progress: { done: 50 } });
    const completions = await readsOfJobs(k.job(""), async () => [
      await backend.complete(q, plain.id, { worker: "w", result: "a" }),
      await backend.complete(q, beaten.id, { worker: "w", result: "b" }),
    ]);
    expect(completions.reads).toBe(0);
    for (const job of completions.result) expect(job).toEqual(await backend.get(q, job.id));
    expect(completions.result[1]?.progress).toEqual({ done: 50 });
    // A run this Backend did not hand out (another process took the job back and ran it again):
    // the completion reads the hash, and answers that run.
    const rerun = String(Number(await redis.hget(k.job(lapsed.id), "processedOn")) + 1);
    await redis.hset(k.job(lapsed.id), "processedOn", rerun, "syLeaseStart", rerun);
    const other = await readsOfJobs(k.job(""), () => backend.complete(q, lapsed.id, { worker: "w" }));
    expect(other.reads).toBe(1);
    expect(other.result).toEqual(await backend.get(q, lapsed.id));
  });
});

/** What `work` returns, and how many HGETALLs of keys under `prefix` the server ran meanwhile (seen over MONITOR). */
async function readsOfJobs<T>(prefix: string, work: () => Promise<T>): Promise<{ result: T; reads: number }> {
  const monitor = await redis.monitor();
  const marker = `done-${randomUUID()}`;
  let reads = 0;
  const finished = new Promise<void>((resolve) =>
    monitor.on("monitor", (_time: string, [command, key]: string[]) => {
      if (command?.toLowerCase() === "hgetall" && key?.startsWith(prefix)) reads++;
      if (command?.toLowerCase() === "echo" && key === marker) resolve();
    }),
  );
  const result = await work();
  // MONITOR tells commands in the order the server ran them: once the marker is seen, so is the work.
  await redis.echo(marker);
  await finished;
  monitor.disconnect();
  return { result, reads };
}
