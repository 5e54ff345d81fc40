import type { JobEventFeed, StoreEvent } from "@switchyard/core";
import { afterAll, describe, expect, it } from "vitest";
import { createWorkerQueueBackend } from "../src/index.js";
import { dateMs } from "../src/row.js";
import { DIALECTS, rawKnex, useDialectTable } from "./dialects.js";

/**
 * The store event feed reads the rows changed since its newest one as writes come, and reads the last
 * two seconds again about once a second: a move dated before the newest row it read (a transaction
 * that committed late, or a whole-second date) is still told, once.
 */
for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): store event feed`, () => {
    const { table, db, open, queue: nextQueue } = useDialectTable(dialect, "wq_feed");

    it("a move dated before the newest row the feed read is told within a few seconds, and once", async () => {
      const wq = await open();
      const q = nextQueue("feed");
      const events: StoreEvent[] = [];
      const watch = (wq as unknown as JobEventFeed).watchEvents((event) => events.push(event), {});
      try {
        const seen = async (jobId: string, type: string) => {
          const deadline = Date.now() + 5_000;
          while (!events.some((event) => event.jobId === jobId && event.type === type)) {
            if (Date.now() > deadline) throw new Error(`no ${type} event for ${jobId}: ${JSON.stringify(events)}`);
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        };
        // The feed tells nothing dated before it began: the late move below must date after that.
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        const { job: early } = await wq.enqueue(q, { name: "early" });
        await seen(early.id, "enqueued");
        // Writes keep coming, so the feed reads on from its newest row.
        for (let i = 0; i < 5; i++) await wq.enqueue(q, { name: `later ${i}` });
        const { job: newest } = await wq.enqueue(q, { name: "newest" });
        await seen(newest.id, "enqueued");
        const newestRow = await db(table).where("id", Number(newest.id)).first();
        // SQLite keeps UTC text without a zone; the others a date.
        const newestMs =
          dialect === "sqlite"
            ? Date.parse(`${String(newestRow.updated_at).replace(" ", "T")}Z`)
            : new Date(newestRow.updated_at).getTime();
        const stamp = new Date(newestMs - 800);
        // A late commit: the early job failed at a time before the newest row's.
        await db(table)
          .where("id", Number(early.id))
          .update({
            status: "error",
            updated_at: dialect === "sqlite" ? stamp.toISOString().replace("T", " ").slice(0, 19) : stamp,
          });

        await seen(early.id, "failed");
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        expect(events.filter((event) => event.jobId === early.id && event.type === "failed")).toHaveLength(1);
      } finally {
        await watch.close();
      }
    });
  });
}

/**
 * PostgreSQL's feed is woken by a statement trigger's NOTIFY, one per write; it looks at the table at
 * most once per 20 ms however many come, and tells every move all the same. Its reads are counted at
 * the backend's own knex.
 */
describe("workerqueue-sql (postgres): store event feed under a stream of writes", () => {
  const { url, table, open, queue: nextQueue } = useDialectTable("postgres", "wq_feedgap");
  const counted = rawKnex(url);
  let looks = 0;
  counted.on("query", (query: { sql: string }) => {
    if (query.sql.includes('order by "updated_at"')) looks++;
  });
  afterAll(() => counted.destroy());

  it("one look per 20 ms at most while every enqueue NOTIFYs, and each enqueue is told", async () => {
    await open(); // creates the table and its trigger
    const wq = createWorkerQueueBackend({ knex: counted, table });
    await wq.ready();
    const q = nextQueue("gap");
    const events: StoreEvent[] = [];
    const watch = (wq as unknown as JobEventFeed).watchEvents((event) => events.push(event), {});
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const before = looks;
      const started = Date.now();
      const ids: string[] = [];
      // One after the other: each its own statement, so each its own NOTIFY.
      for (let i = 0; i < 150; i++) ids.push((await wq.enqueue(q, { name: `stream ${i}` })).job.id);
      const elapsed = Date.now() - started;
      const during = looks - before;
      expect(during).toBeGreaterThan(0);
      expect(during).toBeLessThanOrEqual(Math.ceil(elapsed / 20) + 2);
      const deadline = Date.now() + 5_000;
      const told = () => new Set(events.filter((event) => event.queue === q && event.type === "enqueued").map((event) => event.jobId));
      while (told().size < ids.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect([...told()].sort()).toEqual([...ids].sort());
    } finally {
      await watch.close();
      await wq.close();
    }
  });
});

/**
 * A feed asked for some moves only (`tellOnly`) leaves the other rows unread at the store: under a
 * stream of enqueues that no subscriber needs, it reads no row of them. Asked for every move again,
 * it tells what happens from then on, not what it left unread. Rows read are counted at the
 * backend's own knex.
 */
for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): a store event feed told to tell only some moves`, () => {
    const { url, table, open, queue: nextQueue } = useDialectTable(dialect, "wq_feedonly");
    const counted = rawKnex(url);
    let feedRows = 0;
    counted.on("query-response", (response: unknown, query: { sql: string }) => {
      if (/order by [`"]?updated_at/.test(query.sql) && Array.isArray(response)) feedRows += response.length;
    });
    afterAll(() => counted.destroy());

    it("reads no row of the enqueues nobody needs, tells the completion asked for, and after widening only what follows", async () => {
      await open(); // creates the table (and on PostgreSQL its trigger)
      const wq = createWorkerQueueBackend({ knex: counted, table, releaseDelayedEveryMs: 0 });
      await wq.ready();
      const q = nextQueue("only");
      const events: StoreEvent[] = [];
      const watch = (wq as unknown as JobEventFeed).watchEvents((event) => events.push(event), {});
      const toldFor = (jobId: string, type: string) => events.filter((event) => event.jobId === jobId && event.type === type);
      const until = async (done: () => boolean, what: string) => {
        const deadline = Date.now() + 5_000;
        while (!done()) {
          if (Date.now() > deadline) throw new Error(`${what}: ${JSON.stringify(events)}`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      };
      try {
        expect([...(watch.tellOnly?.(new Set(["completed", "failed"])) ?? [])].sort()).toEqual(["canceled", "completed", "failed"]);
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        const readBefore = feedRows;
        const enqueued: string[] = [];
        for (let i = 0; i < 20; i++) enqueued.push((await wq.enqueue(q, { name: `unread ${i}` })).job.id);
        const [held] = await wq.reserve(q, { worker: "w" });
        await wq.complete(q, held?.id as string, { worker: "w" });
        await until(() => toldFor(held?.id as string, "completed").length > 0, "the completion told");
        expect(events.filter((event) => event.type !== "completed")).toEqual([]);
        // The completed row, read again with the overlap at most a few times; none of the 20 pending rows.
        expect(feedRows - readBefore).toBeLessThanOrEqual(3);

        // Every move again: the 19 enqueues left unread are not news; a later one is.
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        expect(watch.tellOnly?.(null)).toBeNull();
        const { job: later } = await wq.enqueue(q, { name: "later" });
        await until(() => toldFor(later.id, "enqueued").length > 0, "the later enqueue told");
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        expect(enqueued.filter((id) => toldFor(id, "enqueued").length > 0)).toEqual([]);
        expect(toldFor(later.id, "enqueued")).toHaveLength(1);
      } finally {
        await watch.close();
        await wq.close();
      }
    });
  });
}

/**
 * A narrowed feed's looks follow the table's changes, not only the rows they tell: under a stream of
 * enqueues that nobody needs, each look reads from the last few seconds, however long ago the last
 * move it told (every look read from the watch's start before, 30 ms a look in the gateway's event
 * loop after 150,000 enqueues on SQLite). The lower bound of each look is its query's own
 * `updated_at` binding; a completion after the stream is still told, once.
 */
for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): a narrowed feed under a stream of writes it does not tell`, () => {
    const { url, table, open, queue: nextQueue } = useDialectTable(dialect, "wq_feedfollow");
    const counted = rawKnex(url);
    /** Each look's lower bound on updated_at, in epoch ms, and when it was sent. */
    const bounds: Array<{ at: number; from: number }> = [];
    counted.on("query", (query: { sql: string; bindings: unknown[] }) => {
      if (!/order by [`"]?updated_at/.test(query.sql)) return;
      const dates = query.bindings.filter(
        (value) => value instanceof Date || (typeof value === "string" && /^\d{4}-\d\d-\d\d/.test(value)),
      );
      bounds.push({ at: Date.now(), from: Math.min(...dates.map((value) => dateMs(value) ?? Number.NaN)) });
    });
    afterAll(() => counted.destroy());

    it("reads only the last seconds' changes at each look, and still tells a later completion once", async () => {
      await open(); // creates the table (and on PostgreSQL its trigger)
      const wq = createWorkerQueueBackend({ knex: counted, table, releaseDelayedEveryMs: 0 });
      await wq.ready();
      const q = nextQueue("follow");
      const events: StoreEvent[] = [];
      const watch = (wq as unknown as JobEventFeed).watchEvents((event) => events.push(event), {});
      try {
        watch.tellOnly?.(new Set(["completed"]));
        const started = Date.now();
        while (Date.now() - started < 5_000) {
          await wq.enqueueBulk(
            q,
            Array.from({ length: 20 }, (_, i) => ({ name: `unread ${i}` })),
          );
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        // The looks of the stream's last half second reach back 4.5 s at most, not to its start 6.5 s
        // back or more (the overlap is two seconds, dates may be whole seconds, `since` is what the
        // previous look found, up to a poll of 500 ms before; a second more for a slow machine).
        const late = bounds.filter((bound) => bound.at >= started + 4_500);
        expect(late.length).toBeGreaterThan(0);
        for (const bound of late) expect(bound.from).toBeGreaterThanOrEqual(bound.at - 4_500);

        const [held] = await wq.reserve(q, { worker: "w" });
        await wq.complete(q, held?.id as string, { worker: "w" });
        const deadline = Date.now() + 5_000;
        while (!events.some((event) => event.jobId === held?.id) && Date.now() < deadline)
          await new Promise((resolve) => setTimeout(resolve, 50));
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        expect(events.map((event) => [event.type, event.jobId])).toEqual([["completed", held?.id]]);
      } finally {
        await watch.close();
        await wq.close();
      }
    });
  });
}

/**
 * SQLite reads a narrowed look by change time: `status IN (...)` would send it through the status
 * index, sorting every row of those statuses (every pending job) at each page of each look, 5 to 9 ms
 * a page at 40,000 pending jobs (1.2 ms by the updated_at index). The plan is SQLite's own EXPLAIN
 * QUERY PLAN of the look the feed sent.
 */
describe("workerqueue-sql (sqlite): the plan of a narrowed feed's look", () => {
  const { url, table, db, open } = useDialectTable("sqlite", "wq_feedplan");

  it("reads the rows changed since in the updated_at index, with no sort", async () => {
    await open(); // creates the table
    const counted = rawKnex(url);
    const looks: Array<{ sql: string; bindings: unknown[] }> = [];
    counted.on("query", (query: { sql: string; bindings: unknown[] }) => {
      if (/order by [`"]?updated_at/.test(query.sql)) looks.push(query);
    });
    const wq = createWorkerQueueBackend({ knex: counted, table, releaseDelayedEveryMs: 0 });
    await wq.enqueueBulk(
      "plan",
      Array.from({ length: 2_000 }, (_, i) => ({ name: `pending ${i}` })),
    );
    await db.raw("analyze");
    const watch = (wq as unknown as JobEventFeed).watchEvents(() => {}, {});
    try {
      watch.tellOnly?.(new Set(["enqueued", "completed"]));
      looks.length = 0;
      while (looks.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
      const [look] = looks;
      expect(look?.sql).toContain("status in");
      const plan = ((await db.raw(`explain query plan ${look?.sql}`, look?.bindings as never)) as Array<{ detail: string }>).map(
        (line) => line.detail,
      );
      expect(plan.filter((line) => line.startsWith(`SEARCH ${table}`))).toEqual([
        expect.stringContaining(`USING INDEX ${table}_updated_at_idx`),
      ]);
      expect(plan.filter((line) => line.includes("TEMP B-TREE"))).toEqual([]);
    } finally {
      await watch.close();
      await wq.close();
      await counted.destroy();
    }
  });
});

/**
 * A look that goes on from a row (the next page, or the next look from the newest row read) asks for
 * rows after that row's (updated_at, id). SQLite seeks to the row's time in the updated_at index; an
 * OR of the two comparisons alone has no bound it can seek to, and SQLite walked the index from its
 * first entry at every such page (21 ms a page at 180,000 rows, in the gateway's event loop).
 */
describe("workerqueue-sql (sqlite): the plan of a look going on from a row", () => {
  const { url, table, open } = useDialectTable("sqlite", "wq_feedafter");

  it("seeks to the row's change time in the updated_at index", async () => {
    await open(); // creates the table
    const counted = rawKnex(url);
    const goingOn: Array<{ sql: string; bindings: unknown[] }> = [];
    counted.on("query", (query: { sql: string; bindings: unknown[] }) => {
      if (/order by [`"]?updated_at/.test(query.sql) && /[`"]?id[`"]? > \?/.test(query.sql)) goingOn.push(query);
    });
    const wq = createWorkerQueueBackend({ knex: counted, table, releaseDelayedEveryMs: 0 });
    // More than a page of changes: the look's second page goes on from the first one's last row.
    await wq.enqueueBulk(
      "after",
      Array.from({ length: 1_200 }, (_, i) => ({ name: `job ${i}` })),
    );
    const watch = (wq as unknown as JobEventFeed).watchEvents(() => {}, {});
    try {
      const deadline = Date.now() + 5_000;
      while (goingOn.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      const [look] = goingOn;
      if (!look) throw new Error("the feed read no page after a row");
      const plan = ((await counted.raw(`explain query plan ${look.sql}`, look.bindings as never)) as Array<{ detail: string }>).map(
        (line) => line.detail,
      );
      expect(plan).toEqual([`SEARCH ${table} USING INDEX ${table}_updated_at_idx (updated_at>?)`]);
    } finally {
      await watch.close();
      await wq.close();
      await counted.destroy();
    }
  });
});

/**
 * better-sqlite3 answers at once, so a look of many pages would run in one turn of the event loop and
 * hold every request meanwhile (35 to 130 ms under 2,000 enqueues/s): between two pages of a look the
 * event loop turns. Counted by a setImmediate chain running beside the look.
 */
describe("workerqueue-sql (sqlite): a look of many pages", () => {
  const { url, table, open } = useDialectTable("sqlite", "wq_feedturns");

  it("lets the event loop turn between its pages", async () => {
    await open(); // creates the table
    const counted = rawKnex(url);
    const wq = createWorkerQueueBackend({ knex: counted, table, releaseDelayedEveryMs: 0 });
    let turns = 0;
    let turning = true;
    const turn = () => {
      turns++;
      if (turning) setImmediate(turn);
    };
    /** At each page query of the feed: the turns so far, and the events told so far. */
    const pages: Array<{ turns: number; told: number }> = [];
    const events: StoreEvent[] = [];
    counted.on("query", (query: { sql: string }) => {
      if (/order by [`"]?updated_at/.test(query.sql)) pages.push({ turns, told: events.length });
    });
    const watch = (wq as unknown as JobEventFeed).watchEvents((event) => events.push(event), {});
    try {
      await wq.enqueueBulk(
        "turns",
        Array.from({ length: 1_000 }, (_, i) => ({ name: `job ${i}` })),
      );
      await wq.enqueueBulk(
        "turns",
        Array.from({ length: 1_000 }, (_, i) => ({ name: `job ${1_000 + i}` })),
      );
      setImmediate(turn);
      const deadline = Date.now() + 5_000;
      while (events.length < 2_000 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(events.length).toBeGreaterThanOrEqual(2_000);
      // A page that follows a full page of 500 told moves belongs to the same look: a turn came between.
      const nextPages = pages.slice(1).filter((page, i) => page.told - pages[i]!.told === 500);
      expect(nextPages.length).toBeGreaterThanOrEqual(3);
      for (const page of nextPages) expect(page.turns).toBeGreaterThan(pages[pages.indexOf(page) - 1]!.turns);
    } finally {
      turning = false;
      await watch.close();
      await wq.close();
      await counted.destroy();
    }
  });
});
