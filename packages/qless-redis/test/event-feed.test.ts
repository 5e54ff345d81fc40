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
});
