import {
  type CompleteOptions,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_ATTEMPTS,
  type FailOptions,
  type HeartbeatOptions,
  InvalidStateError,
  type Job,
  JobErrorSchema,
  type JobState,
  type Json,
  LeaseLostError,
  NotFoundError,
  ValidationError,
  backoffDelay,
  parseOrThrow,
} from "@switchyard/core";
import type { Knex } from "knex";
import { quoted } from "./bulk-insert.js";
import { type JobRow, STATUS, SY, UNLOCKED } from "./columns.js";
import { withRetry } from "./db-errors.js";
import { findRow, jobRowId, rowById } from "./lookup.js";
import { type Statement, sendScript } from "./mysql-script.js";
import type { Store } from "./options.js";
import { delayedLock, durationSeconds, num, rjqueueLocked, rowToJob, sqlDate, stateOf } from "./row.js";
import { whereState } from "./where.js";

/** What a transition requires of the row before it may change it. */
interface Expect {
  /** Worker that must hold the lease, when the caller names one. */
  worker?: string | undefined;
  /** States the job must be in; otherwise `onWrongState` says which error. */
  states: JobState[];
  onWrongState: "invalid-state" | "lease-lost";
}

/**
 * Reads the row, checks state and lease, then updates it only if it is still exactly as read (same
 * status and lock id), so a concurrent claim or expiry cannot be overwritten. A lost race re-reads
 * and re-checks, which turns it into the right typed error.
 */
export async function transition(
  store: Store,
  queue: string,
  id: string,
  what: string,
  expect: Expect,
  change: (row: JobRow, now: number) => Record<string, unknown>,
): Promise<Job> {
  return withRetry(what, async () => {
    for (let attempt = 0; attempt < 5; attempt++) {
      const now = store.now();
      const row = await findRow(store, store.knex, queue, id);
      if (!row) throw new NotFoundError(`workerqueue-sql: no job ${id} in queue ${queue}`, { queue, id });
      const state = stateOf(row, now);
      if (!expect.states.includes(state)) {
        if (expect.onWrongState === "lease-lost") throw new LeaseLostError(`workerqueue-sql: job ${id} is ${state}, not held by a worker`);
        throw new InvalidStateError(`workerqueue-sql: cannot ${what} job ${id}: it is ${state}`, { queue, id, state });
      }
      if (expect.worker !== undefined && state === "active" && row.sy_worker !== expect.worker) {
        throw new LeaseLostError(`workerqueue-sql: job ${id} is not leased to ${expect.worker}`, { queue, id, worker: expect.worker });
      }
      const update = store.knex(store.table).where("id", row.id);
      // The row must still be as read: same status and same lock id (a re-claim always changes the lock).
      if (row.locked_queue_id === null) update.whereNull("locked_queue_id");
      else update.where("locked_queue_id", row.locked_queue_id);
      if (row.status === null) update.whereNull("status");
      else update.where("status", row.status);
      const values = { ...change(row, now), updated_at: sqlDate(store, now) };
      if (store.dialect === "mysql") {
        if ((await update.update(values)) === 1) return rowToJob(store, await rowById(store, store.knex, row.id));
        continue;
      }
      const [changed] = (await update.update(values, "*")) as JobRow[];
      if (changed) return rowToJob(store, changed);
    }
    throw new LeaseLostError(`workerqueue-sql: job ${id} kept changing while being updated`);
  });
}

/**
 * The one-statement path of a transition that only an active job, held by `worker` when one is
 * named, may take and whose new values do not depend on the row's old ones (SQL expressions aside):
 * an UPDATE guarded by those conditions, RETURNING the row. Null when it changed nothing (the caller
 * then takes transition(), whose read says which error it is). MySQL has no UPDATE ... RETURNING:
 * there the same guarded UPDATE and its read-back go as one script (mysqlHeldUpdate), or, on a
 * connection that takes one statement per text, it is null and transition()'s read, update and
 * read-back.
 */
async function updateHeld(
  store: Store,
  queue: string,
  id: string,
  worker: string | undefined,
  values: Record<string, unknown>,
): Promise<Job | null> {
  if (store.dialect === "mysql") {
    return withRetry("update", async () => {
      const update = mysqlHeldUpdate(store, queue, id, worker, values, store.now());
      const results = await sendScript(store, update.statements);
      const row = results && update.row(results);
      return row ? rowToJob(store, row) : null;
    });
  }
  return withRetry("update", async () => {
    const [row] = (await heldUpdate(store, queue, id, worker, values, store.now())) as JobRow[];
    return row ? rowToJob(store, row) : null;
  });
}

/** The guarded UPDATE ... RETURNING * of updateHeld(), unsent. (PostgreSQL's group claim finds and completes rows its own way: postgres-claim.ts.) */
export function heldUpdate(
  store: Store,
  queue: string,
  id: string,
  worker: string | undefined,
  values: Record<string, unknown>,
  now: number,
) {
  const { knex, table } = store;
  // The row findRow would pick: a caller-chosen id wins over a row id of the same spelling.
  const target = jobRowId(store, queue, id);
  const query = knex(table).whereRaw(`id = ${target.sql}`, target.bindings);
  whereState(store, query, "active", now);
  if (worker !== undefined) query.where(SY.worker, worker);
  return query.update({ ...values, updated_at: sqlDate(store, now) }, "*");
}

/**
 * heldUpdate() as statements of a MySQL-family script (one round trip, run by sendScript() in a
 * READ COMMITTED transaction, as the claim is, so the UPDATE takes no gap locks): the id findRow
 * would pick (jobRowId) goes into `@sy_id` by a plain SELECT ... INTO, which locks nothing (`SET @v := (SELECT
 * ...)` would take a shared lock on the row, held to the commit, and its upgrade to the UPDATE's
 * exclusive one can deadlock with a claimer's locking read); the guarded UPDATE takes that row only
 * while it is still active (and held by `worker` when one is named); `@sy_done` keeps how many rows
 * it matched; the read-back answers the row only if it did. MariaDB's group claim
 * (mariadb-claim.ts) completes jobs the same way at the head of its transaction.
 */
export function mysqlHeldUpdate(
  store: Store,
  queue: string,
  id: string,
  worker: string | undefined,
  values: Record<string, unknown>,
  now: number,
): { statements: Statement[]; row(results: unknown[]): JobRow | null } {
  // The id findRow would pick, NULL when none: a SELECT of one value always sets the variable.
  const target = jobRowId(store, queue, id);
  const statements: Statement[] = [
    { sql: `select ${target.sql} into @sy_id`, bindings: target.bindings },
    mysqlGuardedUpdate(store, "@sy_id", worker, values, now),
    { sql: "set @sy_done := row_count()", bindings: [] },
    { sql: `select * from ${quoted(store, store.table)} where id = @sy_id and @sy_done > 0`, bindings: [] },
  ];
  const readBack = statements.length - 1;
  return { statements, row: (results) => (results[readBack] as JobRow[])[0] ?? null };
}

/** mysqlHeldUpdate()'s guarded UPDATE of the row whose id is in the user variable `idVariable` (MariaDB's group claim, mariadb-claim.ts, sends one per completion). */
export function mysqlGuardedUpdate(
  store: Store,
  idVariable: string,
  worker: string | undefined,
  values: Record<string, unknown>,
  now: number,
): Statement {
  const { knex, table } = store;
  const query = knex(table).where("id", knex.raw(idVariable));
  whereState(store, query, "active", now);
  if (worker !== undefined) query.where(SY.worker, worker);
  const built = query.update({ ...values, updated_at: sqlDate(store, now) }).toSQL();
  return { sql: built.sql, bindings: [...built.bindings] as Knex.RawBinding[] };
}

export async function heartbeatJob(store: Store, queue: string, id: string, options: HeartbeatOptions): Promise<Job> {
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  if (!Number.isInteger(leaseMs) || leaseMs < 1) throw new ValidationError("workerqueue-sql: leaseMs must be a positive integer");
  if (typeof options.worker !== "string" || options.worker.length === 0) {
    throw new ValidationError("workerqueue-sql: heartbeat needs the worker that holds the lease");
  }
  const values = (now: number) => ({
    [SY.worker]: options.worker,
    [SY.leaseUntil]: now + leaseMs,
    ...(options.progress !== undefined ? { [SY.progress]: JSON.stringify(options.progress) } : {}),
  });
  return (
    (await updateHeld(store, queue, id, options.worker, values(store.now()))) ??
    transition(store, queue, id, "heartbeat", { worker: options.worker, states: ["active"], onWrongState: "lease-lost" }, (_, now) =>
      values(now),
    )
  );
}

/**
 * RunRelease: the lease ends now (the next claim takes the row first, as it takes every lapsed lease)
 * and `attempts` drops by one, so the claim that hands the job out again brings it back to this run's count.
 */
export async function releaseJob(store: Store, queue: string, id: string, worker: string): Promise<Job> {
  if (typeof worker !== "string" || worker.length === 0) {
    throw new ValidationError("workerqueue-sql: release needs the worker that holds the lease");
  }
  const values = (now: number) => ({
    [SY.leaseUntil]: now - 1,
    attempts: store.knex.raw("case when attempts > 0 then attempts - 1 else 0 end"),
  });
  return (
    (await updateHeld(store, queue, id, worker, values(store.now()))) ??
    transition(store, queue, id, "release", { worker, states: ["active"], onWrongState: "lease-lost" }, (_, now) => values(now))
  );
}

export async function setJobProgress(store: Store, queue: string, id: string, worker: string | undefined, progress: Json): Promise<Job> {
  const values = { [SY.progress]: JSON.stringify(progress) };
  return (
    (await updateHeld(store, queue, id, worker, values)) ??
    transition(store, queue, id, "set progress of", { worker, states: ["active"], onWrongState: "invalid-state" }, () => values)
  );
}

/** Finished: status `complete`, unlocked, `duration` in seconds as rjqueue writes it. */
export async function completeJob(store: Store, queue: string, id: string, options: CompleteOptions = {}): Promise<Job> {
  return (
    (await updateHeld(store, queue, id, options.worker, completeValues(store, options, store.now()))) ??
    completeByTransition(store, queue, id, options)
  );
}

/** complete() by a read and a guarded update: what a refused one-statement completion falls back to, to name the error. */
export function completeByTransition(store: Store, queue: string, id: string, options: CompleteOptions = {}): Promise<Job> {
  return transition(
    store,
    queue,
    id,
    "complete",
    { worker: options.worker, states: ["active"], onWrongState: "invalid-state" },
    (row, at) => finished(store, row, at, STATUS.complete, resultColumn(options)),
  );
}

const resultColumn = (options: CompleteOptions) => (options.result !== undefined ? { [SY.result]: JSON.stringify(options.result) } : {});

/** What complete() writes in one statement: the duration (durationSeconds()) in SQL, from the row's own start time. */
export function completeValues(store: Store, options: CompleteOptions, now: number): Record<string, unknown> {
  const greatest = store.dialect === "sqlite" ? "max" : "greatest";
  const duration = store.knex.raw(`case when ?? is null then null else ${greatest}(0, round((? - ??) / 1000.0)) end`, [
    SY.startedMs,
    now,
    SY.startedMs,
  ]);
  return { ...finishedColumns(store, now, STATUS.complete, resultColumn(options)), duration };
}

/** The longest wait before a retry: ten years. */
export const MAX_RETRY_DELAY_MS = 10 * 365 * 24 * 3600 * 1000;

/** Retries (pending, after the backoff) while attempts remain, else `error` for good. */
export function failJob(store: Store, queue: string, id: string, options: FailOptions): Promise<Job> {
  const error = parseOrThrow(JobErrorSchema, options.error, "error");
  const { retryDelay } = options;
  if (retryDelay !== undefined && (typeof retryDelay !== "number" || Number.isNaN(retryDelay) || retryDelay < 0)) {
    throw new ValidationError("workerqueue-sql: retryDelay must be a non-negative number of milliseconds");
  }
  return transition(store, queue, id, "fail", { worker: options.worker, states: ["active"], onWrongState: "invalid-state" }, (row, now) => {
    const attempts = Number(row.attempts ?? 0);
    const maxAttempts = num(row.sy_max_attempts) ?? DEFAULT_MAX_ATTEMPTS;
    const errorColumns = { details: error.message, [SY.errorGroup]: error.group ?? null };
    if (options.retry === false || attempts >= maxAttempts) return finished(store, row, now, STATUS.error, errorColumns);
    const backoff = row.sy_backoff ? JSON.parse(row.sy_backoff) : null;
    // Capped, so that now + delay stays a bigint (and a safe integer) however large the backoff grows.
    const delay = Math.min(options.retryDelay ?? backoffDelay(backoff, attempts), MAX_RETRY_DELAY_MS);
    return {
      ...errorColumns,
      status: STATUS.pending,
      locked_queue_id: delay > 0 ? delayedLock(store) : UNLOCKED,
      ...rjqueueLocked(store, delay > 0),
      [SY.runAt]: delay > 0 ? now + delay : null,
      [SY.worker]: null,
      [SY.leaseUntil]: null,
    };
  });
}

/** Withdrawn: status `error` (which no daemon picks up) with `sy_canceled_ms` set. */
export async function cancelJob(store: Store, queue: string, id: string): Promise<void> {
  await transition(
    store,
    queue,
    id,
    "cancel",
    { states: ["waiting", "delayed", "active", "blocked"], onWrongState: "invalid-state" },
    (row, now) => finished(store, row, now, STATUS.error, { [SY.canceledMs]: now, details: row.details ?? "canceled" }),
  );
}

function finished(store: Store, row: JobRow, now: number, status: string, extra: Record<string, unknown>): Record<string, unknown> {
  const started = num(row.sy_started_ms);
  return {
    ...finishedColumns(store, now, status, extra),
    duration: started !== null && status === STATUS.complete ? durationSeconds(started, now) : null,
  };
}

/** What finishing writes, but the duration (which depends on the row's start time). */
function finishedColumns(store: Store, now: number, status: string, extra: Record<string, unknown>): Record<string, unknown> {
  return {
    status,
    locked_queue_id: UNLOCKED,
    ...rjqueueLocked(store, false),
    [SY.worker]: null,
    [SY.leaseUntil]: null,
    [SY.runAt]: null,
    [SY.finishedMs]: now,
    // The job lets its unique key go: a new enqueue with it makes a new job (sy_unique_key keeps the record).
    [SY.uniqueSlot]: null,
    ...extra,
  };
}
