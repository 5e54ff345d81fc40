import {
  type EventWatch,
  type JobEventFeed,
  type JobEventType,
  type StoreEvent,
  ToldMoves,
  eventTypeOfState,
  pause,
  watchInRounds,
} from "@switchyard/core";
import { ACTIVE_STATUSES, COMPLETE_STATUSES, type JobRow, STATUS } from "./columns.js";
import type { Store } from "./options.js";
import { dateMs, jobIdOf, sqlDate, stateOf } from "./row.js";

/**
 * Job events read from the `jobs` table by change time: every write Switchyard makes sets
 * `updated_at` (indexed), so the rows changed since the last look are the moves. A look sees a row's
 * latest state only (two moves between looks are one event), and workqd and rjqueue never set
 * `updated_at`, so their claims and finishes are not seen. PostgreSQL is looked at as soon as a
 * statement trigger's NOTIFY says the table changed; SQLite and MySQL/MariaDB on a timer.
 */

/**
 * How often the table is looked at without a NOTIFY (the others' pace; PostgreSQL's safety net, and
 * what finds a late commit dated before the newest row read within about a second, see `look`).
 */
const POLL_MS = { sqlite: 250, mysql: 500, postgres: 1_000 } as const;
/**
 * Each look reads again the rows changed this long before the newest change it saw: `updated_at`
 * has whole seconds on SQLite and MySQL, and a transaction may commit after a later-dated one.
 */
const OVERLAP_MS = 2_000;
const PAGE = 500;
/**
 * PostgreSQL: the least time from one look to the next, however many NOTIFYs come between. Under a
 * stream of writes each statement NOTIFYs, and a look per NOTIFY would cost the server a read for
 * every few writes; a look every LOOK_GAP_MS at most reads what came meanwhile at once.
 */
const LOOK_GAP_MS = 20;

/** The NOTIFY channel of a table's changes (see `installChangeTrigger`). */
export const changeChannel = (table: string) => `switchyard_${table}`;

/** A promise that settles after the event loop has served what was waiting (I/O included). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function eventOf(row: JobRow, store: Store, now: number): StoreEvent {
  const type = eventTypeOfState(stateOf(row, now), row.attempts ?? 0);
  const time = dateMs(row.updated_at) ?? now;
  return { type, queue: row.sy_queue ?? store.defaultQueue, jobId: jobIdOf(row), time, position: `${time}:${row.id}` };
}

const parsePosition = (position: string): { time: number; id: number } => {
  const [time, id] = position.split(":").map(Number);
  return { time: Number.isFinite(time) ? (time as number) : 0, id: Number.isFinite(id) ? (id as number) : 0 };
};

/** Whether row `a` comes after row `b` in change order (updated_at, then id), as read. */
function isAfter(a: JobRow, b: JobRow): boolean {
  const [at, bt] = [dateMs(a.updated_at) ?? 0, dateMs(b.updated_at) ?? 0];
  return at > bt || (at === bt && Number(a.id) > Number(b.id));
}

/**
 * The statuses a row is in after each move this feed tells (it sees states, so these are all it tells),
 * so a look for some moves leaves the other rows unread. An rjqueue row still `pending` is taken once
 * locked; `completed` is the stale README's word, which a hand-written row might hold.
 */
const STATUSES_AFTER: ReadonlyMap<JobEventType, readonly string[]> = new Map([
  ["enqueued", [STATUS.pending]],
  ["delayed", [STATUS.pending]],
  ["retrying", [STATUS.pending]],
  ["active", [...ACTIVE_STATUSES, STATUS.pending]],
  ["completed", COMPLETE_STATUSES],
  ["failed", [STATUS.error]],
  ["canceled", [STATUS.error]],
]);

/** The statuses to read for `types` (null: every row). */
function statusesFor(types: ReadonlySet<JobEventType> | null): string[] | null {
  return types === null ? null : [...new Set([...types].flatMap((type) => STATUSES_AFTER.get(type) ?? []))];
}

/** The moves a look at rows of `statuses` tells (null: every move, when it reads every row). */
function typesTold(statuses: string[] | null): Set<JobEventType> | null {
  if (statuses === null) return null;
  return new Set([...STATUSES_AFTER].filter(([, after]) => after.every((status) => statuses.includes(status))).map(([type]) => type));
}

const COLUMNS = ["id", "status", "attempts", "locked_queue_id", "sy_queue", "sy_job_id", "sy_run_at", "sy_canceled_ms", "updated_at"];

/**
 * Rows changed at `since` or later (after the row `after`, as read), oldest change first; only those
 * in `statuses` when given.
 */
function changedSince(store: Store, since: number, limit: number, after?: JobRow, statuses?: string[] | null): Promise<JobRow[]> {
  const columns = store.layout.rjqueueLocked ? [...COLUMNS, "locked"] : COLUMNS;
  const query = store.knex(store.table).select(columns);
  // SQLite would read `status IN (...)` through the status index and sort every row of those
  // statuses (all pending jobs) at each page of each look; `+status` is no index term there, so the
  // updated_at index reads only the rows changed since.
  if (statuses && store.dialect === "sqlite") query.whereRaw(`+status in (${statuses.map(() => "?").join(", ")})`, statuses);
  else if (statuses) query.whereIn("status", statuses);
  // After a row: `updated_at >= its time` first, which the index seeks to. The OR alone, with no
  // bound of its own, made SQLite walk the updated_at index from its first entry at every such page
  // (21 ms against 0.84 a page at 180,000 rows, in the event loop).
  if (after)
    query
      .where("updated_at", ">=", after.updated_at as string)
      .where((q) => q.where("updated_at", ">", after.updated_at as string).orWhere("id", ">", after.id));
  else query.where("updated_at", ">=", sqlDate(store, since));
  return query.orderBy([{ column: "updated_at" }, { column: "id" }]).limit(limit) as Promise<JobRow[]>;
}

/** The change time of the table's newest change, in epoch ms (one seek in the updated_at index), or undefined when empty. */
async function newestChange(store: Store): Promise<number | undefined> {
  const row = (await store.knex(store.table).max({ newest: "updated_at" }).first()) as { newest?: unknown } | undefined;
  return dateMs(row?.newest) ?? undefined;
}

/**
 * Waits for PostgreSQL to say the table changed, on a connection of its own outside the pool. A
 * connection that fails is reported through `onLost` (the watch listens again on its next round;
 * meanwhile the timer still looks every few seconds).
 */
async function listen(store: Store, onChange: () => void, onLost: (error: Error) => void): Promise<() => Promise<void>> {
  type Listening = { query(sql: string): Promise<unknown>; on(event: "notification" | "error", listener: (error: Error) => void): void };
  const client = store.knex.client as {
    acquireRawConnection(): Promise<Listening>;
    destroyRawConnection(connection: unknown): Promise<void>;
  };
  const connection = await client.acquireRawConnection();
  connection.on("notification", () => onChange());
  connection.on("error", onLost);
  await connection.query(`LISTEN ${changeChannel(store.table)}`);
  return () => client.destroyRawConnection(connection).catch(() => undefined);
}

export function sqlEventFeed(store: Store, ready: () => Promise<void>): Required<JobEventFeed> {
  return {
    eventFeed: {
      mechanism:
        store.dialect === "postgres"
          ? "LISTEN/NOTIFY (a statement trigger on the table), then the rows changed since, by updated_at"
          : `the rows changed since the last look, by updated_at, every ${POLL_MS[store.dialect]} ms`,
      history: true,
      everyMove: false,
      latencyMs: store.dialect === "postgres" ? LOOK_GAP_MS : POLL_MS[store.dialect],
    },

    // Dates may be whole seconds (SQLite, MySQL): a time's position is before its whole second.
    positionAt: (time) => `${Math.floor(time / 1000) * 1000 - 1}:${Number.MAX_SAFE_INTEGER}`,

    async eventsAfter(position, limit) {
      await ready();
      const after = parsePosition(position);
      // A position is a row's stored change time and id, so the keyset compares them as stored.
      const rows = await changedSince(store, after.time, limit, { updated_at: sqlDate(store, after.time), id: after.id } as JobRow);
      const now = Date.now();
      return rows.map((row) => eventOf(row, store, now));
    },

    watchEvents(onEvent, options = {}) {
      let start = options.after ? 0 : Date.now();
      let since = options.after ? parsePosition(options.after).time : start;
      /** The statuses of the rows read (null: every row), as `tellOnly` asked. */
      let statuses: string[] | null = null;
      /** What each row in the overlap was last told as, so a row read again is not told again. */
      const told = new ToldMoves(since, OVERLAP_MS);
      let changed: (() => void) | undefined;
      /** A NOTIFY came since the last look began. */
      let notified = false;
      let stopListening: (() => Promise<void>) | undefined;

      /** The newest row read, and when the overlap was last read again. */
      let newest: JobRow | undefined;
      let overlapReadAt = 0;

      const look = async () => {
        if (statuses?.length === 0) return;
        const now = Date.now();
        // A narrowed look reads only the rows of some statuses, whose changes may be rare: how far the
        // table's changes have come is then read apart, first, so that `since` follows them (else every
        // look read again every change since the watch began: 30 ms a look after 150,000 enqueues,
        // in the gateway's event loop on SQLite).
        const reached = statuses === null ? undefined : await newestChange(store);
        const from = since - OVERLAP_MS;
        // Under a stream of writes a look per NOTIFY reading the whole overlap again would read each
        // row many times: most looks go on from the newest row read, and once every half overlap
        // the overlap is read again for rows a late commit or a whole-second date put behind it.
        const rereadOverlap = newest === undefined || now - overlapReadAt >= OVERLAP_MS / 2;
        if (rereadOverlap) overlapReadAt = now;
        // The newest row read may be older than the overlap (a narrowed look's rows can be rare): the
        // look then goes on from `since`, what came before it having been read by the earlier looks.
        const goOnFrom = rereadOverlap || (dateMs(newest?.updated_at) ?? 0) < from ? undefined : newest;
        for (let last = goOnFrom; ; ) {
          const rows = await changedSince(store, rereadOverlap ? from : since, PAGE, last, statuses);
          for (const row of rows) {
            const event = eventOf(row, store, now);
            const key = `${event.type}:${dateMs(row.updated_at)}:${row.attempts ?? 0}`;
            if (told.told(String(row.id), key)) continue;
            told.tell(String(row.id), key);
            since = Math.max(since, event.time);
            // What changed before the watch began is not news (unless asked for, with `after`);
            // dates may be whole seconds, so the start's second counts as after it.
            if (event.time >= start - (start % 1000)) onEvent(event);
          }
          const final = rows[rows.length - 1];
          if (final && (newest === undefined || isAfter(final, newest))) newest = final;
          if (rows.length < PAGE) break;
          last = final;
          // better-sqlite3 answers at once, so a look of many pages would run in one turn of the event
          // loop and hold every request meanwhile (a reread of the overlap under 2,000 enqueues/s took
          // 35 to 130 ms): the requests go between pages.
          if (store.dialect === "sqlite") await nextTurn();
        }
        if (reached !== undefined) since = Math.max(since, reached);
        told.forgetBefore(since);
      };

      const watch: EventWatch = watchInRounds(
        async (signal) => {
          await ready();
          if (store.dialect === "postgres" && !stopListening)
            stopListening = await listen(
              store,
              () => {
                notified = true;
                changed?.();
              },
              (error) => {
                options.onError?.(error);
                stopListening = undefined;
              },
            );
          notified = false;
          await look();
          if (signal.aborted) return;
          if (store.dialect === "postgres") {
            await pause(LOOK_GAP_MS, signal);
            if (notified || signal.aborted) return;
          }
          // A NOTIFY (PostgreSQL) ends the pause early.
          await pause(POLL_MS[store.dialect] - (store.dialect === "postgres" ? LOOK_GAP_MS : 0), signal, (wake) => {
            changed = wake;
          });
        },
        { pauseMs: 0, ...(options.onError ? { onError: options.onError } : {}) },
      );
      return {
        close: async () => {
          await watch.close();
          await stopListening?.();
        },
        tellOnly(types) {
          const wanted = statusesFor(types);
          const widened = statuses !== null && (wanted === null || wanted.some((status) => !statuses?.includes(status)));
          statuses = wanted;
          // What the rows left unread held is not news now: the look goes on from the present, and
          // reads the overlap before it only to know which of its rows were told.
          if (widened) {
            start = Date.now();
            since = start;
            newest = undefined;
          }
          return typesTold(statuses);
        },
      };
    },
  };
}

/** A statement trigger that NOTIFYs the table's channel after each write, whoever wrote. */
export async function installChangeTrigger(store: Store): Promise<void> {
  const { knex, table } = store;
  const trigger = `${table}_sy_notify`;
  const present = await knex.raw("select 1 from pg_trigger where tgname = ?", [trigger]);
  if ((present as { rows: unknown[] }).rows.length > 0) return;
  await knex.raw(
    `create or replace function ${trigger}() returns trigger language plpgsql as $$ begin perform pg_notify('${changeChannel(table)}', ''); return null; end $$`,
  );
  await knex.raw(`create trigger ${trigger} after insert or update on ?? for each statement execute function ${trigger}()`, [table]);
}
