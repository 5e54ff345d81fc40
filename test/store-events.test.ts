import { type Gateway, createGateway } from "@switchyard/gateway";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SseEvent, readEvents } from "../apps/gateway/test/sse.js";
import { type StoreName, type StoreUnderTest, openStore } from "./matrix-backends.js";

/**
 * Events told by the stores themselves: a subscriber on gateway A sees the jobs that gateway B (another
 * process, as far as A can tell: it shares nothing with B but the store) drives, a reserver parked on
 * A wakes as soon as B enqueues, and a subscriber that reconnects to B with an id A gave it gets what
 * it missed from the store's history, where the store keeps one.
 */
const STORES: Array<{ name: StoreName; history: boolean }> = [
  { name: "sqlite", history: true },
  { name: "postgres", history: true },
  { name: "mysql", history: true },
  { name: "qless", history: false },
  { name: "glidemq", history: true },
  { name: "cloudq", history: false },
];
/** Redis database of this suite (no other suite in `npm test` uses it). */
const REDIS_DB = 12;

/** The order of a job's moves; a feed may leave some out (a poll sees latest states) but never reorders them. */
const LIFECYCLE = ["enqueued", "delayed", "active", "progress", "retrying", "completed", "failed", "canceled"];

function movesOf(events: SseEvent[], jobId: string): string[] {
  return events.filter((event) => event.data.jobId === jobId).map((event) => event.event as string);
}

async function until<T>(read: () => T | undefined | false, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

for (const { name, history } of STORES) {
  describe(`store events on ${name}`, () => {
    let store: StoreUnderTest;
    let a: Gateway;
    let b: Gateway;

    // Long polls look again only every 60 s here: a parked reserver that wakes sooner was woken by an event.
    const open = () =>
      createGateway({
        config: { backends: { main: store.spec }, routes: [{ pattern: "*", backend: "main" }], longPollIntervalMs: 60_000 },
        env: {},
      });
    const call = async (gateway: Gateway, method: string, path: string, body?: unknown) => {
      const res = await gateway.app.request(path, {
        method,
        headers: { "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const json = (await res.json()) as { job?: { id: string }; jobs?: Array<{ id: string }> };
      expect(res.status, `${method} ${path}: ${JSON.stringify(json)}`).toBeLessThan(300);
      return json;
    };
    /** One job through B: enqueued, reserved by a worker, then completed or failed for good. */
    const runJob = async (queue: string, outcome: "complete" | "fail") => {
      const id = (await call(b, "POST", `/v1/queues/${queue}/jobs`, { name: "work", data: { n: 1 } })).job?.id as string;
      const reserved = await call(b, "POST", `/v1/queues/${queue}/reserve`, { worker: "w-b", wait: 5_000 });
      expect(reserved.jobs?.map((job) => job.id)).toEqual([id]);
      const finish =
        outcome === "complete" ? { worker: "w-b", result: { ok: true } } : { worker: "w-b", error: { message: "broken" }, retry: false };
      await call(b, "POST", `/v1/queues/${queue}/jobs/${id}/${outcome}`, finish);
      return id;
    };

    beforeAll(async () => {
      // Cloudq in its `remove` layout deletes a completed job, which no later look can see.
      store = openStore(name, REDIS_DB, { completion: "mark-deleted" });
      a = await open();
      b = await open();
    });
    afterAll(async () => {
      await Promise.all([a?.close(), b?.close()]);
      await store?.dispose();
    });

    it("a subscriber on one gateway sees the jobs another gateway drives, in lifecycle order, each move once", async () => {
      const queue = store.track(`events-across-${name}`);
      const watcher = readEvents(a.app, `/v1/queues/${queue}/events`);
      await watcher.response;
      const done = await runJob(queue, "complete");
      const failed = await runJob(queue, "fail");
      await until(
        () => movesOf(watcher.received, done).includes("completed") && movesOf(watcher.received, failed).includes("failed"),
        `A to hear of B's jobs (${JSON.stringify(watcher.received.map((e) => [e.event, e.data.jobId]))})`,
      );
      await watcher.close();
      for (const id of [done, failed]) {
        const moves = movesOf(watcher.received, id);
        expect(moves, `moves of ${id}`).toEqual([...moves].sort((x, y) => LIFECYCLE.indexOf(x) - LIFECYCLE.indexOf(y)));
        expect(new Set(moves).size, `each move of ${id} once: ${moves}`).toBe(moves.length);
      }
      expect(watcher.received.every((event) => event.data.queue === queue && event.data.backend === "main")).toBe(true);
    });

    it("a reserver parked on one gateway wakes when another gateway enqueues, without waiting for its next look", async () => {
      const queue = store.track(`events-wake-${name}`);
      const started = Date.now();
      const parked = a.app.request(`/v1/queues/${queue}/reserve`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ worker: "w-a", wait: 30_000 }),
      });
      await until(() => a.wakeups.parked(queue) === 1, "the reserver to park");
      const id = (await call(b, "POST", `/v1/queues/${queue}/jobs`, { name: "wake" })).job?.id;
      const reserved = (await (await parked).json()) as { jobs: Array<{ id: string }> };
      expect(reserved.jobs.map((job) => job.id)).toEqual([id]);
      // The long poll looks again only after 60 s; anything well short of that was the store's event.
      expect(Date.now() - started).toBeLessThan(30_000);
    });

    it(history
      ? "a subscriber that reconnects to another gateway with Last-Event-ID gets what it missed from the store"
      : "a subscriber that reconnects to another gateway is told that what it missed is not held (reset)", async () => {
      const queue = store.track(`events-resume-${name}`);
      const first = readEvents(a.app, `/v1/queues/${queue}/events`);
      await first.response;
      const seen = await runJob(queue, "complete");
      const [, lastId] = await until(() => {
        const last = first.received.findLast((event) => event.data.jobId === seen && event.event === "completed");
        return last && ([last, last.id as string] as const);
      }, "the first job's completion");
      await first.close();

      const missed = await runJob(queue, "complete");
      const again = readEvents(b.app, `/v1/queues/${queue}/events`, { "last-event-id": lastId });
      await again.response;
      if (!history) {
        await again.atLeast(1);
        await again.close();
        expect(again.received[0]?.event).toBe("reset");
        return;
      }
      await until(() => movesOf(again.received, missed).includes("completed"), "the missed job's completion, replayed");
      await again.close();
      expect(again.received.some((event) => event.event === "reset")).toBe(false);
      expect(movesOf(again.received, seen)).not.toContain("completed");
    });
  });
}
