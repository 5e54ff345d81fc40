import type { JobState } from "@switchyard/core";
import type { Knex } from "knex";
import {
  ACTIVE_STATUSES,
  BLOCKED_LOCKS,
  COMPLETE_STATUSES,
  DELAYED_LOCKS,
  MARKER_LOCKS,
  MAX_ROW_ID,
  RJQUEUE_LOCKED,
  STATUS,
  SY,
  UNLOCKED,
} from "./columns.js";
import type { Store } from "./options.js";

type Builder = Knex.QueryBuilder;

/** Rows of a queue: legacy rows (no `sy_queue`) belong to the default queue. */
export function whereQueue(store: Store, query: Builder, queue: string): Builder {
  if (queue !== store.defaultQueue) return query.where(SY.queue, queue);
  return query.where((q) => q.where(SY.queue, queue).orWhereNull(SY.queue));
}

/** Pending rows a reserve may take now: unlocked, or delayed and due. */
export function whereDue(store: Store, query: Builder, now: number): Builder {
  query
    .where("status", STATUS.pending)
    .whereIn("locked_queue_id", [UNLOCKED, ...DELAYED_LOCKS])
    .where((q) => q.whereNull(SY.runAt).orWhere(SY.runAt, "<=", now));
  return whereNotHeldByRjqueue(store, query);
}

/** rjqueue sets `locked` before it sets `processing`: a pending row it locked is already taken. */
function whereNotHeldByRjqueue(store: Store, query: Builder): Builder {
  if (!store.layout.rjqueueLocked) return query;
  return query.where((q) => q.where(RJQUEUE_LOCKED, false).orWhereNull(RJQUEUE_LOCKED).orWhereIn("locked_queue_id", MARKER_LOCKS));
}

function whereHeldByRjqueue(query: Builder): Builder {
  return query.where("status", STATUS.pending).where(RJQUEUE_LOCKED, true).whereNotIn("locked_queue_id", MARKER_LOCKS);
}

/** Rows Switchyard handed out whose lease ran out; legacy claims (no lease) are never taken back. */
export function whereLeaseExpired(query: Builder, now: number): Builder {
  return query.whereIn("status", ACTIVE_STATUSES).whereNotNull(SY.leaseUntil).where(SY.leaseUntil, "<", now);
}

/** Rows in a core state; the inverse of `stateOf` in row.ts. */
/** Rows no worker holds: not loading or processing, and (on rjqueue's table) not locked by rjqueue. */
export function whereNotActive(store: Store, query: Builder): Builder {
  query.where((q) => q.whereNull("status").orWhereNotIn("status", ACTIVE_STATUSES));
  if (!store.layout.rjqueueLocked) return query;
  // Not whereNot(whereHeldByRjqueue): a NULL `locked` would make that NULL, and keep the row.
  return query.where((q) =>
    q
      .whereNot("status", STATUS.pending)
      .orWhere(RJQUEUE_LOCKED, false)
      .orWhereNull(RJQUEUE_LOCKED)
      .orWhereIn("locked_queue_id", MARKER_LOCKS),
  );
}

export function whereState(store: Store, query: Builder, state: JobState, now: number): Builder {
  switch (state) {
    case "waiting":
      query.where("status", STATUS.pending).where((q) => q.whereNull(SY.runAt).orWhere(SY.runAt, "<=", now));
      return whereNotHeldByRjqueue(store, whereNotBlocked(query));
    case "delayed":
      query.where("status", STATUS.pending).where(SY.runAt, ">", now);
      return whereNotHeldByRjqueue(store, whereNotBlocked(query));
    case "active":
      if (!store.layout.rjqueueLocked) return query.whereIn("status", ACTIVE_STATUSES);
      return query.where((q) => q.whereIn("status", ACTIVE_STATUSES).orWhere(whereHeldByRjqueue));
    case "completed":
      return query.whereIn("status", COMPLETE_STATUSES);
    case "canceled":
      return query.where("status", STATUS.error).whereNotNull(SY.canceledMs);
    case "failed":
      // Everything stateOf() does not place elsewhere, unknown statuses included.
      return query
        .where((q) => q.whereNull("status").orWhereNotIn("status", [STATUS.pending, ...ACTIVE_STATUSES, ...COMPLETE_STATUSES]))
        .where((q) => q.whereNull(SY.canceledMs).orWhereNot("status", STATUS.error));
    case "blocked":
      return query.where("status", STATUS.pending).whereIn("locked_queue_id", BLOCKED_LOCKS);
  }
}

/** A pending row's lock may be NULL in a hand-written row (the column has a default): NULL is not blocked. */
function whereNotBlocked(query: Builder): Builder {
  return query.where((q) => q.whereNull("locked_queue_id").orWhereNotIn("locked_queue_id", BLOCKED_LOCKS));
}

/** The row id a job id can name (a positive integer in the id column's range), or null. */
export function rowIdOf(id: string): number | null {
  return /^[1-9][0-9]{0,9}$/.test(id) && Number(id) <= MAX_ROW_ID ? Number(id) : null;
}
