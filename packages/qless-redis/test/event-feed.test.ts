import type { StoreEvent } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { usePrivateQless } from "./helpers/private-redis.js";

/** The ql:log feed under a burst: messages looked up together are still told one by one, in order. */
const qless = usePrivateQless();

describe("qless-redis: the ql:log event feed", () => {
  it("tells a burst of puts, completions and failures in the order qless published them, scheduled puts as delayed", async () => {
    const events: StoreEvent[] = [];
    const errors: Error[] = [];
    const watch = qless.backend.watchEvents((event) => events.push(event), { onError: (error) => errors.push(error) });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const jobs = Array.from({ length: 300 }, (_, i) => ({ name: "n", data: i, ...(i % 3 === 0 ? { runAt: Date.now() + 60_000 } : {}) }));
    const enqueued = await Promise.all(jobs.map((job) => qless.backend.enqueue("feed", job)));
    // A message that is not JSON, published by someone else, is reported and skipped.
    await qless.redis.publish("ql:log", "not json");
    const [held] = await qless.backend.reserve("feed", { worker: "w" });
    await qless.backend.complete("feed", held?.id as string, { worker: "w" });
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

  it("tells only the moves asked for, and stops listening to ql:log while asked for none", async () => {
    const events: StoreEvent[] = [];
    const watch = qless.backend.watchEvents((event) => events.push(event));
    const listeners = async () => ((await qless.redis.pubsub("NUMSUB", "ql:log")) as [string, number])[1];
    const settle = () => new Promise((resolve) => setTimeout(resolve, 100));
    await settle();
    expect(await listeners()).toBe(1);
    // Only completions: the puts are dropped unread (no job looked up), the completion told.
    expect(watch.tellOnly?.(new Set(["completed", "progress"]))).toEqual(new Set(["completed"]));
    await qless.backend.enqueue("narrow", { name: "a", data: 1 });
    const [held] = await qless.backend.reserve("narrow", { worker: "w" });
    await qless.backend.complete("narrow", held?.id as string, { worker: "w" });
    await settle();
    expect(events.map((event) => event.type)).toEqual(["completed"]);
    // None: no subscription, so qless publishes to no one; asked again, it listens from then on.
    expect(watch.tellOnly?.(new Set())).toEqual(new Set());
    await settle();
    expect(await listeners()).toBe(0);
    await qless.backend.enqueue("narrow", { name: "unheard", data: 2 });
    expect(watch.tellOnly?.(null)).toBeNull();
    await settle();
    expect(await listeners()).toBe(1);
    const { job } = await qless.backend.enqueue("narrow", { name: "heard", data: 3 });
    await settle();
    await watch.close();
    expect(events.map((event) => [event.type, event.jobId ?? ""])).toEqual([
      ["completed", held?.id],
      ["enqueued", job.id],
    ]);
  });
});
