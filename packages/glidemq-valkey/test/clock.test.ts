import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import type { Backend } from "@switchyard/core";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { createGlideMqBackend, queueKeys } from "../src/index.js";
import { removeQueues } from "./support/cleanup.js";

/**
 * The `clock` option is the time the scripts get (they never read Redis's TIME): what the job hashes
 * record and what is due or expired (a qless client's `now` through the gateway), read with HGETALL.
 */
const T0 = 1_000_000_000_000;
const url = `${serviceUrl("redis")}/4`;
let redis: Redis;
let now = T0;
const callers = new AsyncLocalStorage<number>();
let backend: Backend;
const used = new Set<string>();
const queue = () => {
  const name = `clock-${randomUUID().slice(0, 8)}`;
  used.add(name);
  return name;
};

beforeAll(async () => {
  redis = new Redis(url);
  backend = createGlideMqBackend({ redis, clock: () => callers.getStore() ?? now });
  await backend.ready();
});
afterAll(async () => {
  await backend.close();
  await removeQueues(redis, used);
  await redis.quit();
});

describe("glidemq-valkey: the clock option", () => {
  it("job hashes carry the clock's times, and a delay and a lease run out by it", async () => {
    now = T0;
    const q = queue();
    const k = queueKeys(q);
    const { job } = await backend.enqueue(q, { name: "clocked", delay: 10_000 });
    expect(job).toMatchObject({ state: "delayed", createdAt: T0, runAt: T0 + 10_000 });
    expect(await redis.hget(k.job(job.id), "timestamp")).toBe(String(T0));
    expect(await redis.zscore(k.scheduled, job.id)).toBe(String(T0 + 10_000));

    now = T0 + 5_000;
    expect(await backend.reserve(q, { worker: "a" })).toEqual([]);
    now = T0 + 10_000;
    const [taken] = await backend.reserve(q, { worker: "a", leaseMs: 30_000 });
    expect(taken?.lease).toEqual({ worker: "a", expiresAt: T0 + 40_000 });
    expect(await redis.hgetall(k.job(job.id))).toMatchObject({
      state: "active",
      processedOn: String(T0 + 10_000),
      syLeaseStart: String(T0 + 10_000),
      syLeaseUntil: String(T0 + 40_000),
    });

    // The lease runs out by the clock, not by the real time (long past T0).
    now = T0 + 39_999;
    expect(await backend.reserve(q, { worker: "b" })).toEqual([]);
    now = T0 + 40_001;
    const [again] = await backend.reserve(q, { worker: "b", leaseMs: 30_000 });
    expect(again).toMatchObject({ id: job.id, attempts: 2, lease: { worker: "b", expiresAt: T0 + 70_001 } });

    now = T0 + 50_000;
    expect((await backend.heartbeat(q, job.id, { worker: "b", leaseMs: 30_000 })).lease?.expiresAt).toBe(T0 + 80_000);
    expect(await redis.hget(k.job(job.id), "syLeaseUntil")).toBe(String(T0 + 80_000));
    now = T0 + 60_000;
    expect((await backend.complete(q, job.id, { worker: "b" })).finishedAt).toBe(T0 + 60_000);
    expect(await redis.hget(k.job(job.id), "finishedOn")).toBe(String(T0 + 60_000));
  });

  it("completions of one batch on clocks far apart each keep their caller's time", async () => {
    now = T0;
    const q = queue();
    const k = queueKeys(q);
    const [a, b] = await Promise.all([backend.enqueue(q, { name: "one" }), backend.enqueue(q, { name: "two" })]);
    await backend.reserve(q, { worker: "w", count: 2, leaseMs: 600_000 });
    await Promise.all([
      callers.run(T0 + 7_000, () => backend.complete(q, a.job.id, { worker: "w" })),
      callers.run(T0 + 200_000, () => backend.complete(q, b.job.id, { worker: "w" })),
    ]);
    expect(await redis.hget(k.job(a.job.id), "finishedOn")).toBe(String(T0 + 7_000));
    expect(await redis.hget(k.job(b.job.id), "finishedOn")).toBe(String(T0 + 200_000));
  });
});
