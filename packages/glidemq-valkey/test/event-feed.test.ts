import { randomUUID } from "node:crypto";
import { type StoreEvent, hasEventFeed } from "@switchyard/core";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { createGlideMqBackend } from "../src/index.js";
import { removeQueues } from "./support/cleanup.js";

/**
 * The job event feed read from glide-mq's events streams: one blocking XREAD names every queue's
 * stream, so under a stream of events (each enqueue writes one) it reads at most once per 20 ms
 * rather than once per event, and still tells every event. Reads are counted at the driver (this
 * file runs in a process of its own).
 */
// The package's database (no suite flushes it; test/fuzz-openapi.test.ts flushes 15).
const url = `${serviceUrl("redis")}/4`;
const redis = new Redis(url);
const used = new Set<string>();
const queue = (tag: string) => {
  const name = `feed-${tag}-${randomUUID().slice(0, 8)}`;
  used.add(name);
  return name;
};
const backend = createGlideMqBackend({ url });
afterAll(async () => {
  await backend.close();
  await removeQueues(redis, used);
  await redis.quit();
});

let blockingReads = 0;
const xread = Redis.prototype.xread;
Redis.prototype.xread = function (this: Redis, ...args: unknown[]) {
  if (args.includes("BLOCK")) blockingReads++;
  return (xread as (...args: unknown[]) => unknown).apply(this, args);
} as typeof xread;

describe("glidemq-valkey: job event feed", () => {
  it("under a stream of enqueues beside 50 more queues' streams reads at most once per 20 ms, and tells every enqueue", async () => {
    if (!hasEventFeed(backend)) throw new Error("glidemq-valkey has an event feed");
    await backend.ready();
    for (let i = 0; i < 50; i++) await backend.enqueue(queue("other"), { name: "idle", data: {} });
    const busy = queue("busy");
    const told: StoreEvent[] = [];
    const watch = backend.watchEvents((event) => told.push(event));
    try {
      watch.include?.(busy);
      // The first round finds the 50 streams (a SCAN): reads are counted from the first enqueue on.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const readsBefore = blockingReads;
      const started = Date.now();
      const ids: string[] = [];
      for (let i = 0; i < 300; i++) ids.push((await backend.enqueue(busy, { name: "busy", data: { i } })).job.id);
      const deadline = Date.now() + 5_000;
      const toldOfBusy = () => told.filter((event) => event.queue === busy && event.type === "enqueued").map((event) => event.jobId);
      while (toldOfBusy().length < ids.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      const elapsed = Date.now() - started;
      expect(new Set(toldOfBusy())).toEqual(new Set(ids));
      // One read per 20 ms, plus the read in flight at each end.
      expect(blockingReads - readsBefore).toBeLessThanOrEqual(Math.ceil(elapsed / 20) + 2);
    } finally {
      await watch.close();
    }
  });
});

describe("glidemq-valkey: job event feed told only some moves", () => {
  it("tells only the moves asked for, and every move again once asked for all", async () => {
    if (!hasEventFeed(backend)) throw new Error("glidemq-valkey has an event feed");
    const q = queue("narrowed");
    const told: StoreEvent[] = [];
    const watch = backend.watchEvents((event) => told.push(event));
    const toldOf = (type: string) => told.filter((event) => event.queue === q && event.type === type).map((event) => event.jobId);
    const until = async (done: () => boolean) => {
      const deadline = Date.now() + 5_000;
      while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    try {
      expect(watch.tellOnly?.(new Set(["completed", "failed"]))).toEqual(new Set(["completed", "failed"]));
      watch.include?.(q);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const { job } = await backend.enqueue(q, { name: "first" });
      const [reserved] = await backend.reserve(q, { worker: "w" });
      await backend.complete(q, reserved?.id ?? "", { worker: "w" });
      await until(() => toldOf("completed").length > 0);
      expect(toldOf("completed")).toEqual([job.id]);
      // The `added` entry of the enqueue was in the stream read, before the completion's: not told.
      expect(told.filter((event) => event.queue === q && event.type !== "completed")).toEqual([]);
      expect(await redis.xlen(`glide:{${q}}:events`)).toBeGreaterThanOrEqual(2);
      expect(watch.tellOnly?.(null)).toBeNull();
      const { job: second } = await backend.enqueue(q, { name: "second" });
      await until(() => toldOf("enqueued").length > 0);
      expect(toldOf("enqueued")).toEqual([second.id]);
    } finally {
      await watch.close();
    }
  });

  it("asked for delayed moves, tells enqueued ones too: a delayed add is an `added` entry", () => {
    if (!hasEventFeed(backend)) throw new Error("glidemq-valkey has an event feed");
    const watch = backend.watchEvents(() => undefined);
    try {
      expect(watch.tellOnly?.(new Set(["delayed"]))).toEqual(new Set(["delayed", "enqueued"]));
    } finally {
      void watch.close();
    }
  });
});
