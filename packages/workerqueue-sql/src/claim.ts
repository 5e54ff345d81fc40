import { randomUUID } from "node:crypto";
import type { CompleteOptions } from "@switchyard/core";
import type { Knex } from "knex";
import { quoted } from "./bulk-insert.js";
import { ACTIVE_STATUSES, CLAIM_LOCK_PREFIX, DELAYED_LOCKS, type JobRow, STATUS, SY, UNLOCKED } from "./columns.js";
import type { Store } from "./options.js";
import { num, rjqueueLocked, sqlDate } from "./row.js";
import { claimExpiredIndex, claimPendingIndex } from "./schema.js";
import { whereDue, whereLeaseExpired } from "./where.js";

export interface ClaimRequest {
  queue: string;
  worker: string;
  count: number;
  leaseMs: number;
  now: number;
}

/** One caller's part of a group claim (postgres-claim.ts, sqlite-cycle.ts): its reserve, after (completeAndReserve) the completion of the job it holds. */
export interface ClaimItem {
  request: ClaimRequest;
  complete?: { id: string; options: CompleteOptions };
}

/** The completed row (null when the completion changed nothing: then nothing was claimed) and the claimed ones, in claim order. */
export interface ClaimOutcome {
  completed: JobRow | null;
  next: JobRow[];
}

/**
 * Claims up to `count` rows atomically, unless the queue is paused: rows whose Switchyard lease
 * expired first (the core contract), then due pending rows, each in priority (larger first) then id
 * order. The lock id written to `locked_queue_id` is unique per claim and fits the legacy
 * varchar(40), so a legacy daemon sees the row as taken. SQLite does it in one statement;
 * MySQL (no UPDATE ... RETURNING) in a transaction of locking reads, UPDATEs and a read-back.
 * PostgreSQL and MariaDB claims go in groups, one statement (one script) for the concurrent claims
 * of a queue (postgres-claim.ts, mariadb-claim.ts).
 */
export async function claimRows(store: Store, request: ClaimRequest): Promise<JobRow[]> {
  if (store.dialect === "postgres") throw new Error("workerqueue-sql: PostgreSQL claims go through PostgresClaimGroup");
  const lock = newLock();
  return store.dialect === "mysql" ? claimMysqlInSteps(store, request, lock) : claimSqlite(store, request, lock);
}

/** Bounds of one group statement or script: its text grows with the callers, its locks with the rows. */
const MAX_GROUP_ITEMS = 100;
const MAX_GROUP_ROWS = 1000;

/**
 * How many of the waiting callers go in the next group statement or script (postgres-claim.ts,
 * mariadb-claim.ts): within the bounds, and stopping before a second completion of a job already in
 * the group (one statement may not update a row twice; the second goes next, and is refused as it
 * would be alone).
 */
export function takeGroup(waiting: readonly ClaimItem[]): number {
  const completing = new Set<string>();
  let rows = 0;
  for (const [i, item] of waiting.entries()) {
    const id = item.complete?.id;
    const full = i >= MAX_GROUP_ITEMS || rows + item.request.count > MAX_GROUP_ROWS || (id !== undefined && completing.has(id));
    if (i > 0 && full) return i;
    if (id !== undefined) completing.add(id);
    rows += item.request.count;
  }
  return waiting.length;
}

/** A lock id unique to one claim. */
export const newLock = () => `${CLAIM_LOCK_PREFIX}${randomUUID().replaceAll("-", "")}`;

/** Priority (larger first), then id. RETURNING and IN lists promise no order: jobs go out in this one. */
export function byClaimOrder<T extends { id: number | string; sy_priority: number | string | null }>(rows: T[]): T[] {
  return rows.sort((a, b) => (num(b.sy_priority) ?? 0) - (num(a.sy_priority) ?? 0) || Number(a.id) - Number(b.id));
}

const CLAIM_ORDER = [
  { column: SY.priority, order: "desc" },
  { column: "id", order: "asc" },
];

/** MySQL's claim: what taking a row writes (claimSet() below is the same as SQL text). */
function claimValues(store: Store, db: Knex | Knex.Transaction, request: ClaimRequest, lock: string): Record<string, unknown> {
  return {
    status: STATUS.processing,
    locked_queue_id: lock,
    attempts: db.raw("coalesce(??, 0) + 1", ["attempts"]),
    updated_at: sqlDate(store, request.now),
    [SY.worker]: request.worker,
    [SY.leaseUntil]: request.now + request.leaseMs,
    [SY.startedMs]: request.now,
    [SY.runAt]: null,
    ...rjqueueLocked(store, true),
  };
}

/** A condition of a raw statement and its bindings. */
export interface Condition {
  sql: string;
  bindings: Knex.RawBinding[];
}

/** whereQueue() as SQL text: legacy rows (no `sy_queue`) belong to the default queue. */
export function queueCondition(store: Store, queue: string): Condition {
  return { sql: queue === store.defaultQueue ? "(sy_queue = ? or sy_queue is null)" : "sy_queue = ?", bindings: [queue] };
}

/**
 * queueCondition() as one condition per read that an index answers in claim order: the default
 * queue's named rows and its legacy rows without a name are two reads, since an OR of the two is read
 * whole and sorted (SQLite and PostgreSQL alike) at every claim.
 */
export function queueSpellings(store: Store, queue: string): Condition[] {
  const named = { sql: "sy_queue = ?", bindings: [queue] };
  return queue === store.defaultQueue ? [named, { sql: "sy_queue is null", bindings: [] }] : [named];
}

/**
 * ORDER (claim order) spelled as the claim index orders its rows, for a read of one queue spelling and
 * one status (with two statuses it is not claim order): those two fixed, it is the same order, and the
 * planner sees that the index gives it even where the queue is `sy_queue is null` (which, unlike `=`,
 * does not tell it the column is constant).
 */
export const INDEX_ORDER = "order by sy_queue, status, sy_priority desc, id asc";

/** whereLeaseExpired() as SQL text. */
export function expiredCondition(now: number, statuses: readonly string[] = ACTIVE_STATUSES): Condition {
  const status = statuses.length === 1 ? "status = ?" : `status in (${statuses.map(() => "?").join(", ")})`;
  return { sql: `${status} and sy_lease_until is not null and sy_lease_until < ?`, bindings: [...statuses, now] };
}

/** whereDue() as SQL text. */
export function dueCondition(store: Store, now: number): Condition {
  const due: Condition = {
    sql: "status = ? and locked_queue_id in (?, ?, ?) and (sy_run_at is null or sy_run_at <= ?)",
    bindings: [STATUS.pending, UNLOCKED, ...DELAYED_LOCKS, now],
  };
  if (!store.layout.rjqueueLocked) return due;
  return {
    sql: `${due.sql} and (locked = ? or locked is null or locked_queue_id in (?, ?))`,
    bindings: [...due.bindings, false, ...DELAYED_LOCKS],
  };
}

/** The claim's SET list as SQL text (the same values as claimValues). */
function claimSet(store: Store, request: ClaimRequest, lock: string): Condition {
  const set: Condition = {
    sql: "status = ?, locked_queue_id = ?, attempts = coalesce(attempts, 0) + 1, updated_at = ?, sy_worker = ?, sy_lease_until = ?, sy_started_ms = ?, sy_run_at = null",
    bindings: [STATUS.processing, lock, sqlDate(store, request.now), request.worker, request.now + request.leaseMs, request.now],
  };
  if (!store.layout.rjqueueLocked) return set;
  return { sql: `${set.sql}, locked = ?`, bindings: [...set.bindings, true] };
}

export const ORDER = "order by sy_priority desc, id asc";

/**
 * MySQL/MariaDB (10.6+), statement by statement (MySQL, or a connection without
 * multipleStatements; MariaDB's claims go as one script: mariadb-claim.ts): lock the candidates with
 * SKIP LOCKED in a READ COMMITTED transaction, then take them. InnoDB locks every row its locking
 * read examines, matching or not, so each read is one that an index answers in claim order (forced:
 * on a small table the optimizer prefers a full scan, which would lock every row): expired leases
 * first, then due pending rows per `sy_queue` value (the default queue's legacy NULL rows are a
 * second read, as an OR would need a sort).
 */
async function claimMysqlInSteps(store: Store, request: ClaimRequest, lock: string): Promise<JobRow[]> {
  return store.knex.transaction(
    async (trx) => {
      const ids: number[] = [];
      const spellings = queueSpellings(store, request.queue);
      const read = async (index: string, spelling: Condition, filter: (query: Knex.QueryBuilder) => Knex.QueryBuilder) => {
        const query = trx.from(trx.raw("?? force index (??)", [store.table, index])).select("id", SY.priority);
        query.whereRaw(spelling.sql, spelling.bindings);
        filter(query);
        // The pause is looked at by the read itself (a subquery of a locking read takes no lock).
        query.whereNotExists((paused) => paused.select(trx.raw("1")).from(store.pausedTable).where("queue", request.queue));
        const rows = await query.orderBy(CLAIM_ORDER).limit(request.count).forUpdate().skipLocked();
        return rows as Array<{ id: number; sy_priority: number }>;
      };
      // Each branch is read in order; the best of both are taken (the rest unlock at commit).
      const expired: Array<{ id: number; sy_priority: number }> = [];
      for (const spelling of spellings) {
        expired.push(...(await read(claimExpiredIndex(store.table), spelling, (q) => whereLeaseExpired(q, request.now))));
      }
      ids.push(
        ...byClaimOrder(expired)
          .slice(0, request.count)
          .map((row) => row.id),
      );
      if (ids.length < request.count) {
        const due: Array<{ id: number; sy_priority: number }> = [];
        for (const spelling of spellings) {
          due.push(...(await read(claimPendingIndex(store.table), spelling, (q) => whereDue(store, q, request.now))));
        }
        ids.push(
          ...byClaimOrder(due)
            .slice(0, request.count - ids.length)
            .map((row) => row.id),
        );
      }
      if (ids.length === 0) return [];
      await trx(store.table)
        .whereIn("id", ids)
        .update(claimValues(store, trx, request, lock));
      const rows = (await trx(store.table).whereIn("id", ids)) as JobRow[];
      // In the order picked: expired leases first.
      return ids.flatMap((id) => rows.filter((row) => Number(row.id) === Number(id)));
    },
    // READ COMMITTED: no gap locks, so the UPDATE's new index entries never wait on (and deadlock
    // with) another claimer's scan; rows a read examined but did not match are unlocked at once.
    { isolationLevel: "read committed" },
  );
}

/**
 * SQLite: one UPDATE ... RETURNING statement takes the write lock, so the claim is atomic. Its
 * candidates are the best expired leases, then the best due rows, each list read in claim order from
 * its index. The jobs come back in priority then id order (RETURNING cannot say which list a row
 * came from), so within one claim of several an expired job may follow a due one of higher priority.
 */
async function claimSqlite(store: Store, request: ClaimRequest, lock: string): Promise<JobRow[]> {
  const claim = sqliteClaim(store, request, lock);
  return byClaimOrder((await store.knex.raw(claim.sql, claim.bindings)) as JobRow[]);
}

/** SQLite's claim as one UPDATE ... RETURNING * (its rows in no order: byClaimOrder() sorts them). */
export function sqliteClaim(store: Store, request: ClaimRequest, lock: string): Condition {
  const table = quoted(store, store.table);
  const set = claimSet(store, request, lock);
  const lists: Array<[number, Condition]> = [...expiredLists(request.now), [1, dueCondition(store, request.now)]];
  const reads = lists.flatMap(([tier, condition]) =>
    queueSpellings(store, request.queue).map((spelling) => ({
      sql: `select id, tier, priority from (
           select id, ${tier} as tier, sy_priority as priority from ${table}
           where ${spelling.sql} and ${condition.sql} ${INDEX_ORDER} limit ?)`,
      bindings: [...spelling.bindings, ...condition.bindings, request.count],
    })),
  );
  return {
    sql: `update ${table} set ${set.sql} where id in (
       select id from (${reads.map((read) => read.sql).join(" union all ")}
         order by tier, priority desc, id asc limit ?))
     and not exists (${pausedRead(store)})
     returning *`,
    bindings: [...set.bindings, ...reads.flatMap((read) => read.bindings), request.count, request.queue],
  };
}

/** The claim's lists of expired leases (tier 0): one per held status, so that each read in INDEX_ORDER has one status. */
const expiredLists = (now: number): Array<[number, Condition]> => ACTIVE_STATUSES.map((status) => [0, expiredCondition(now, [status])]);

/** A row when the queue (the binding) is paused. */
const pausedRead = (store: Store) => `select 1 from ${quoted(store, store.pausedTable)} where queue = ?`;

/** SQLite: `{paused, expired}`, whether the queue is paused and whether it holds a lease expired at `now` (what sqliteClaim's expired reads find). */
export function sqliteClaimProbe(store: Store, queue: string, now: number): Condition {
  const table = quoted(store, store.table);
  const reads = expiredLists(now).flatMap(([, condition]) =>
    queueSpellings(store, queue).map((spelling) => ({
      sql: `select 1 from ${table} where ${spelling.sql} and ${condition.sql}`,
      bindings: [...spelling.bindings, ...condition.bindings],
    })),
  );
  return {
    sql: `select exists (${pausedRead(store)}) as paused, exists (${reads.map((read) => read.sql).join(" union all ")}) as expired`,
    bindings: [queue, ...reads.flatMap((read) => read.bindings)],
  };
}

/** SQLite: the ids of the first `count` due rows of the queue, in claim order (what sqliteClaim's due reads find). */
export function sqliteDueIds(store: Store, queue: string, now: number, count: number): Condition {
  const table = quoted(store, store.table);
  const due = dueCondition(store, now);
  const reads = queueSpellings(store, queue).map((spelling) => ({
    sql: `select * from (select id, sy_priority from ${table} where ${spelling.sql} and ${due.sql} ${INDEX_ORDER} limit ?)`,
    bindings: [...spelling.bindings, ...due.bindings, count],
  }));
  return {
    sql: `select id from (${reads.map((read) => read.sql).join(" union all ")}) order by sy_priority desc, id asc limit ?`,
    bindings: [...reads.flatMap((read) => read.bindings), count],
  };
}

/** SQLite: the claim of rows already chosen (sqliteDueIds, in the same transaction) as one UPDATE ... RETURNING *. */
export function sqliteClaimIds(store: Store, request: ClaimRequest, lock: string, ids: readonly number[]): Condition {
  const set = claimSet(store, request, lock);
  return {
    sql: `update ${quoted(store, store.table)} set ${set.sql} where id in (${ids.map(() => "?").join(", ")}) returning *`,
    bindings: [...set.bindings, ...ids],
  };
}

/**
 * Clears the delay marker of pending rows that have become due, so legacy daemons (which only take
 * rows whose lock is '') may run them too. Switchyard's own claim does not need it. Returns how many
 * rows it released. One UPDATE, so several gateways running it at once release each row once.
 */
export async function releaseDueDelayed(store: Store, now: number): Promise<number> {
  return store
    .knex(store.table)
    .where("status", STATUS.pending)
    .whereIn("locked_queue_id", DELAYED_LOCKS)
    .where(SY.runAt, "<=", now)
    .update({ locked_queue_id: UNLOCKED, ...rjqueueLocked(store, false) });
}
