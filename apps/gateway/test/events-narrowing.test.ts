import { randomUUID } from "node:crypto";
import type { Backend } from "@switchyard/core";
import { createWorkerQueueBackend } from "@switchyard/workerqueue-sql";
import knexFactory from "knex";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { type JobEvent, JobEvents, observedBackend } from "../src/events.js";

/**
 * The gateway asks the stores' feeds for the moves its subscribers need only: with none that needs
 * every move (the dashboard's counts need completions and failures), a PostgreSQL feed leaves the
 * enqueued rows unread. A subscriber that comes then hears what happens from then on, each move once,
 * whether this gateway or another process made it; and a replay from memory across the time the feed
 * read only some moves is refused, so it is read from the store's history instead. No linger here
 * (the gateway keeps every move told for a minute after its last such subscriber).
 */
const table = `evnarrow_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
const pg = knexFactory({ client: "pg", connection: serviceUrl("postgres") });
const stores: Backend[] = [];
let events: JobEvents;
/** This gateway's backend (its calls told at once) and another process's on the same table. */
let ours: Backend;
let theirs: Backend;

beforeAll(async () => {
  const open = () => {
    const store = createWorkerQueueBackend({ url: serviceUrl("postgres"), table });
    stores.push(store);
    return store;
  };
  events = new JobEvents(0);
  const store = open();
  await store.ready();
  events.follow("main", store, (error) => {
    throw error;
  });
  ours = observedBackend("main", store, events);
  theirs = open();
});
afterAll(async () => {
  await events.close();
  await Promise.all(stores.map((store) => store.close()));
  await pg.schema.dropTableIfExists(table);
  await pg.schema.dropTableIfExists(`${table}_paused_queues`);
  await pg.schema.dropTableIfExists(`${table}_sy_recurring`);
  await pg.destroy();
});

async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("the store feed reads only the moves the subscribers need", () => {
  it("a subscriber that comes after moves nobody needed hears only what follows, each once, from either process", async () => {
    const queue = `narrow-${randomUUID().slice(0, 8)}`;
    const finished: JobEvent[] = [];
    const stopCounting = events.subscribe((event) => finished.push(event), ["completed", "failed"]);
    const everyMove: JobEvent[] = [];
    let stopHearing: (() => void) | undefined;
    const lastBefore = events.lastId;
    try {
      // Moves nobody needs told: enqueues here and there; one completion there, which is needed.
      const unheard = [
        ...(await Promise.all(Array.from({ length: 10 }, (_, i) => ours.enqueue(queue, { name: `ours ${i}` })))),
        ...(await Promise.all(Array.from({ length: 10 }, (_, i) => theirs.enqueue(queue, { name: `theirs ${i}` })))),
      ].map(({ job }) => job.id);
      const [held] = await theirs.reserve(queue, { worker: "w" });
      await theirs.complete(queue, held?.id as string, { worker: "w" });
      await until(() => finished.some((event) => event.jobId === held?.id && event.type === "completed"), "their completion");
      await new Promise((resolve) => setTimeout(resolve, 1_100));

      const widenedAt = Date.now();
      stopHearing = events.subscribe((event) => everyMove.push(event));
      // The store's history is taken up from then, not from the last move the narrowed feed told.
      const [positionTime] = (events.positions().get("main") ?? "").split(":").map(Number);
      expect(positionTime).toBeGreaterThanOrEqual(widenedAt - 1_000);
      const { job: mine } = await ours.enqueue(queue, { name: "mine" });
      const { job: other } = await theirs.enqueue(queue, { name: "other" });
      await until(() => everyMove.some((event) => event.jobId === other.id), "their enqueue after subscribing");
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const heard = everyMove.filter((event) => event.queue === queue).map((event) => [event.type, event.jobId]);
      expect(heard).toEqual([
        ["enqueued", mine.id],
        ["enqueued", other.id],
      ]);
      expect(unheard.filter((id) => everyMove.some((event) => event.jobId === id))).toEqual([]);
      // The memory does not hold their moves made while only some were read: no replay from it across them.
      expect(events.since(lastBefore).complete).toBe(false);
      expect(events.since(events.lastId).complete).toBe(true);
    } finally {
      stopHearing?.();
      stopCounting();
    }
  });
});
