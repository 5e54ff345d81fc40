import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { CLAIM_LOCK_PREFIX, DELAYED_LOCKS, type JobRow, STATUS, SY, UNLOCKED } from "./columns.js";
import type { Store } from "./options.js";
import { num, rjqueueLocked, sqlDate } from "./row.js";
import { claimExpiredIndex, claimPendingIndex } from "./schema.js";
import { whereDue, whereLeaseExpired, whereQueue } from "./where.js";

export interface ClaimRequest {
  queue: string;
  worker: string;
  count: number;
  leaseMs: number;
  now: number;
}

/**
 * Claims up to `count` rows atomically: rows whose Switchyard lease expired first (the core
 * contract), then due pending rows, each in priority (larger first) then id order. The lock id
 * written to `locked_queue_id` is unique per claim and fits the legacy varchar(40), so a legacy
 * daemon sees the row as taken.
 */
export async function claimRows(store: Store, request: ClaimRequest): Promise<JobRow[]> {
  const lock = `${CLAIM_LOCK_PREFIX}${randomUUID().replaceAll("-", "")}`;
  if (store.dialect === "mysql") return claimMysql(store, request, lock);
  const claim = store.dialect === "postgres" ? claimPostgres : claimSqlite;
  // Two claims, each atomic: a row is in at most one of them, as the first has taken it.
  const expired = byClaimOrder(await claim(store, request, lock, (q) => whereLeaseExpired(q, request.now)));
  if (expired.length >= request.count) return expired;
  const due = await claim(store, { ...request, count: request.count - expired.length }, lock, (q) => whereDue(store, q, request.now));
  return [...expired, ...byClaimOrder(due)];
}

/** Priority (larger first), then id. RETURNING and IN lists promise no order: jobs go out in this one. */
function byClaimOrder<T extends { id: number | string; sy_priority: number | string | null }>(rows: T[]): T[] {
  return rows.sort((a, b) => (num(b.sy_priority) ?? 0) - (num(a.sy_priority) ?? 0) || Number(a.id) - Number(b.id));
}

type Filter = (query: Knex.QueryBuilder) => Knex.QueryBuilder;

const CLAIM_ORDER = [
  { column: SY.priority, order: "desc" },
  { column: "id", order: "asc" },
];

function candidates(store: Store, db: Knex | Knex.Transaction, request: ClaimRequest, filter: Filter): Knex.QueryBuilder {
  const query = db(store.table).select("id");
  whereQueue(store, query, request.queue);
  return query
    .where((q) => filter(q))
    .orderBy(CLAIM_ORDER)
    .limit(request.count);
}

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

/**
 * One UPDATE over a locked, skip-locked CTE: concurrent claimers pass each other's rows by. Built as
 * one query with bindings (never as text): the pg client rewrites every `?` of a raw text into `$n`,
 * even inside quoted strings, so a `?` in a queue or worker name would break a text-built claim.
 */
async function claimPostgres(store: Store, request: ClaimRequest, lock: string, filter: Filter): Promise<JobRow[]> {
  const { knex } = store;
  const picked = candidates(store, knex, request, filter).forUpdate().skipLocked();
  const result = await knex(store.table)
    .withMaterialized("picked", picked)
    .update(claimValues(store, knex, request, lock))
    .whereRaw("?? in (select id from picked)", [`${store.table}.id`])
    .returning("*");
  return result as unknown as JobRow[];
}

/**
 * MySQL/MariaDB (10.6+): lock the candidates with SKIP LOCKED in a transaction, then take them.
 * InnoDB locks every row its locking read examines, matching or not, so each read is one that an
 * index answers in claim order (forced: on a small table the optimizer prefers a full scan, which
 * would lock every row): expired leases first, then due pending rows per `sy_queue` value (the
 * default queue's legacy NULL rows are a second read, as an OR would need a sort).
 */
async function claimMysql(store: Store, request: ClaimRequest, lock: string): Promise<JobRow[]> {
  return store.knex.transaction(
    async (trx) => {
      const ids: number[] = [];
      const queueValues: Array<string | null> = request.queue === store.defaultQueue ? [request.queue, null] : [request.queue];
      const read = async (index: string, queueValue: string | null, filter: (query: Knex.QueryBuilder) => Knex.QueryBuilder) => {
        const query = trx.from(trx.raw("?? force index (??)", [store.table, index])).select("id", SY.priority);
        if (queueValue === null) query.whereNull(SY.queue);
        else query.where(SY.queue, queueValue);
        filter(query);
        const rows = await query.orderBy(CLAIM_ORDER).limit(request.count).forUpdate().skipLocked();
        return rows as Array<{ id: number; sy_priority: number }>;
      };
      // Each branch is read in order; the best of both are taken (the rest unlock at commit).
      const expired: Array<{ id: number; sy_priority: number }> = [];
      for (const queueValue of queueValues) {
        expired.push(...(await read(claimExpiredIndex(store.table), queueValue, (q) => whereLeaseExpired(q, request.now))));
      }
      ids.push(
        ...byClaimOrder(expired)
          .slice(0, request.count)
          .map((row) => row.id),
      );
      if (ids.length < request.count) {
        const due: Array<{ id: number; sy_priority: number }> = [];
        for (const queueValue of queueValues) {
          due.push(...(await read(claimPendingIndex(store.table), queueValue, (q) => whereDue(store, q, request.now))));
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

/** SQLite: one UPDATE ... RETURNING statement takes the write lock, so the claim is atomic. */
async function claimSqlite(store: Store, request: ClaimRequest, lock: string, filter: Filter): Promise<JobRow[]> {
  const { knex } = store;
  return (await knex(store.table)
    .whereIn("id", candidates(store, knex, request, filter))
    .update(claimValues(store, knex, request, lock), "*")) as unknown as JobRow[];
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
