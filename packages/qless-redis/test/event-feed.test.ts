import type { StoreEvent } from "@switchyard/core";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type QlessBackend, createQlessBackend } from "../src/index.js";
import { type PrivateRedis, startPrivateRedis } from "./helpers/private-redis.js";

/** The ql:log feed under a burst: messages looked up together are still told one by one, in order. */
let server: PrivateRedis;
let redis: Redis;
let backend: QlessBackend;

beforeAll(async () => {
  server = await startPrivateRedis();
  redis = server.connect();
  backend = createQlessBackend({ redis });
  await backend.ready();
});

afterAll(async () => {
  await backend?.close();
  await server?.stop();
});

describe("qless-redis: the ql:log event feed", () => {
  it("tells a burst of puts, completions and failures in the order qless published them, scheduled puts as delayed", async () => {
    const events: StoreEvent[] = [];
    const errors: Error[] = [];
    const watch = backend.watchEvents((event) => events.push(event), { onError: (error) => errors.push(error) });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const jobs = Array.from({ length: 300 }, (_, i) => ({ name: "n", data: i, ...(i % 3 === 0 ? { runAt: Date.now() + 60_000 } : {}) }));
    const enqueued = await Promise.all(jobs.map((job) => backend.enqueue("feed", job)));
    // A message that is not JSON, published by someone else, is reported and skipped.
    await redis.publish("ql:log", "not json");
    const [held] = await backend.reserve("feed", { worker: "w" });
    await backend.complete("feed", held?.id as string, { worker: "w" });
    const deadline = Date.now() + 10_000;
    while (events.length < 301 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await watch.close();
    expect(events.map((event) => [event.jobId, event.type])).toEqual([
      ...enqueued.map(({ job }, i) => [job.id, i % 3 === 0 ? "delayed" : "enqueued"]),
      [held?.id, "completed"],
    ]);
    expect(events.every((event) => event.queue === "feed")).toBe(true);
    expect(errors.map((error) => error.name)).toEqual(["SyntaxError"]);
  });
});
