import {
  type Backoff,
  DEFAULT_MAX_ATTEMPTS,
  type HeldJob,
  type Job,
  type JobState,
  type Json,
  type NormalizedEnqueueInput,
  ValidationError,
} from "@switchyard/core";
import {
  ACTIVE_STATUSES,
  BLOCKED_LOCK,
  BLOCKED_LOCKS,
  COMPLETE_STATUSES,
  DELAYED_LOCK,
  type JobRow,
  MARKER_LOCKS,
  MAX_ROW_ID,
  MYSQL_BLOCKED_LOCK,
  MYSQL_DELAYED_LOCK,
  RJQUEUE_LOCKED,
  STATUS,
  SY,
  UNLOCKED,
} from "./columns.js";
import { decodeData, encodeData, formatOf } from "./encoding.js";
import type { Store } from "./options.js";

/**
 * The row's own legacy columns travel in `Job.native.workerqueue`, as qless's and glide-mq's do under
 * their system's name, so that top-level native keys stay the producer's own (a Cloudq job's extra
 * keys...). Of these, `taskable_id`/`taskable_type` are written back on import and may be given at
 * enqueue; the others describe the row and are shown only.
 */
export const NATIVE_KEY = "workerqueue";

export function jobIdOf(row: JobRow): string {
  return row.sy_job_id ?? String(row.id);
}

/** The core state a row stands for; see the README's state table. */
export function stateOf(row: JobRow, now: number): JobState {
  const status = row.status ?? "";
  const lock = row.locked_queue_id ?? "";
  if (status === STATUS.pending && BLOCKED_LOCKS.includes(lock)) return "blocked";
  // rjqueue locks a pending row before it marks it processing: already taken.
  if (status === STATUS.pending && isTrue(row.locked) && !MARKER_LOCKS.includes(lock)) return "active";
  if (status === STATUS.pending) {
    const runAt = num(row.sy_run_at);
    return runAt !== null && runAt > now ? "delayed" : "waiting";
  }
  if ((ACTIVE_STATUSES as string[]).includes(status)) return "active";
  if (COMPLETE_STATUSES.includes(status)) return "completed";
  if (status === STATUS.error && num(row.sy_canceled_ms) !== null) return "canceled";
  return "failed";
}

/**
 * The jobs read from rows marked `sy_has_dependents` (dependencies.ts): the Backend looks for their
 * dependents to release once they complete. Kept beside the Job, which has no field for the store's
 * bookkeeping.
 */
const markedParents = new WeakSet<Job>();

export const hasDependents = (job: Job): boolean => markedParents.has(job);

export function rowToJob(store: Store, row: JobRow, now = store.now()): Job {
  const job = jobOfRow(store, row, now);
  if (isTrue(row.sy_has_dependents)) markedParents.add(job);
  return job;
}

function jobOfRow(store: Store, row: JobRow, now: number): Job {
  const state = stateOf(row, now);
  const createdAt = num(row.sy_created_ms) ?? dateMs(row.created_at) ?? 0;
  const own: Record<string, unknown> = { status: row.status, locked_queue_id: row.locked_queue_id };
  if (row.duration !== undefined && row.duration !== null) own.duration = Number(row.duration);
  if (row.taskable_id !== undefined && row.taskable_id !== null) own.taskable_id = Number(row.taskable_id);
  if (row.taskable_type !== undefined && row.taskable_type !== null) own.taskable_type = row.taskable_type;
  own.data_format = formatOf(row.data);
  const native = { ...parseJson<Record<string, unknown>>(row.sy_native, {}), [NATIVE_KEY]: own };
  const leaseUntil = num(row.sy_lease_until);
  return {
    id: jobIdOf(row),
    queue: row.sy_queue ?? store.defaultQueue,
    name: row.name,
    data: decodeData(row.data),
    state,
    priority: num(row.sy_priority) ?? 0,
    runAt: state === "delayed" ? num(row.sy_run_at) : null,
    attempts: Number(row.attempts ?? 0),
    maxAttempts: num(row.sy_max_attempts) ?? DEFAULT_MAX_ATTEMPTS,
    backoff: parseJson<Backoff | null>(row.sy_backoff, null),
    // A job a legacy daemon holds has no lease Switchyard knows of: active, lease null.
    lease: state === "active" && row.sy_worker !== null && leaseUntil !== null ? { worker: row.sy_worker, expiresAt: leaseUntil } : null,
    createdAt,
    startedAt: num(row.sy_started_ms),
    finishedAt: num(row.sy_finished_ms),
    result: parseJson<Json>(row.sy_result, null),
    error: row.details !== null && row.details !== undefined ? errorOf(row) : null,
    progress: parseJson<Json>(row.sy_progress, null),
    tags: parseJson<string[]>(row.sy_tags, []),
    dependsOn: parseJson<string[]>(row.sy_depends_on, []),
    uniqueKey: row.sy_unique_key,
    native,
  };
}

/** The columns heldJobOf() reads: what an import's INSERT answers, rather than every column of every row. */
export function heldColumns(store: Store): string {
  const columns = ["id", "name", "data", "status", "locked_queue_id", "attempts", "sy_queue", "sy_job_id", "sy_priority"];
  // Not created_at: sy_created_ms is always written by Switchyard, and a datetime costs a parse.
  columns.push("sy_run_at", "sy_created_ms", "sy_canceled_ms");
  if (store.layout.rjqueueLocked) columns.push(RJQUEUE_LOCKED);
  return columns.join(", ");
}

/** What a migration checks of a stored job (core's HeldJob), from the heldColumns() of its row; as rowToJob() reads them. */
export function heldJobOf(row: JobRow, now: number): HeldJob {
  const state = stateOf(row, now);
  return {
    id: jobIdOf(row),
    name: row.name,
    data: decodeData(row.data),
    state,
    priority: num(row.sy_priority) ?? 0,
    attempts: Number(row.attempts ?? 0),
    runAt: state === "delayed" ? num(row.sy_run_at) : null,
    createdAt: num(row.sy_created_ms) ?? dateMs(row.created_at) ?? 0,
  };
}

function errorOf(row: JobRow): Job["error"] {
  const message = row.details ?? "";
  return row.sy_error_group ? { group: row.sy_error_group, message } : { message };
}

/**
 * The columns of a new pending row for an enqueue; `blocked` when some job it depends on has not
 * completed (dependencies.ts decides).
 */
export function enqueueRow(store: Store, queue: string, input: NormalizedEnqueueInput, runAt: number | null, now: number, blocked = false) {
  const { legacy, native } = splitNative(input.native ?? {});
  return {
    name: input.name,
    data: encodeData(input.data, store.dataFormat),
    status: STATUS.pending,
    attempts: 0,
    locked_queue_id: blocked ? blockedLock(store) : runAt === null ? UNLOCKED : delayedLock(store),
    ...rjqueueLocked(store, blocked || runAt !== null),
    created_at: sqlDate(store, now),
    updated_at: sqlDate(store, now),
    ...legacy,
    [SY.queue]: queue,
    [SY.jobId]: input.id ?? null,
    [SY.priority]: input.priority,
    [SY.runAt]: runAt,
    [SY.maxAttempts]: input.maxAttempts,
    [SY.backoff]: input.backoff ? JSON.stringify(input.backoff) : null,
    [SY.uniqueKey]: input.uniqueKey ?? null,
    [SY.uniqueSlot]: input.uniqueKey ?? null,
    [SY.tags]: input.tags.length > 0 ? JSON.stringify(input.tags) : null,
    [SY.dependsOn]: input.dependsOn.length > 0 ? JSON.stringify(input.dependsOn) : null,
    [SY.native]: Object.keys(native).length > 0 ? JSON.stringify(native) : null,
    [SY.createdMs]: now,
  };
}

/** The columns of an imported job: its state, attempts, timestamps and extras as they were. */
export function importRow(store: Store, queue: string, job: Job, now: number) {
  const { legacy, native, own } = splitNative(job.native);
  // An active job's lease belongs to the old store: it arrives waiting, attempts kept.
  const state = job.state === "active" ? "waiting" : job.state;
  const delayed = state === "delayed" && job.runAt !== null && job.runAt > now;
  const blocked = state === "blocked";
  const status =
    state === "waiting" || state === "delayed" || blocked ? STATUS.pending : state === "completed" ? STATUS.complete : STATUS.error;
  const dataFormat = own.data_format === "yaml" ? "yaml" : store.dataFormat;
  return {
    name: job.name,
    data: encodeData(job.data, dataFormat),
    status,
    attempts: job.attempts,
    locked_queue_id: blocked ? blockedLock(store) : delayed ? delayedLock(store) : UNLOCKED,
    ...rjqueueLocked(store, blocked || delayed),
    created_at: sqlDate(store, job.createdAt),
    updated_at: sqlDate(store, now),
    details: job.error?.message ?? null,
    duration:
      state === "completed" && job.startedAt !== null && job.finishedAt !== null ? durationSeconds(job.startedAt, job.finishedAt) : null,
    ...legacy,
    [SY.queue]: queue,
    [SY.jobId]: job.id,
    [SY.priority]: job.priority,
    [SY.runAt]: delayed ? job.runAt : null,
    [SY.maxAttempts]: job.maxAttempts,
    [SY.backoff]: job.backoff ? JSON.stringify(job.backoff) : null,
    [SY.uniqueKey]: job.uniqueKey,
    // A finished job no longer holds its key (see SY.uniqueSlot).
    [SY.uniqueSlot]: status === STATUS.pending ? job.uniqueKey : null,
    [SY.result]: job.result === null ? null : JSON.stringify(job.result),
    [SY.progress]: job.progress === null ? null : JSON.stringify(job.progress),
    [SY.errorGroup]: job.error?.group ?? null,
    [SY.tags]: job.tags.length > 0 ? JSON.stringify(job.tags) : null,
    [SY.dependsOn]: job.dependsOn.length > 0 ? JSON.stringify(job.dependsOn) : null,
    [SY.native]: Object.keys(native).length > 0 ? JSON.stringify(native) : null,
    [SY.createdMs]: job.createdAt,
    [SY.startedMs]: job.startedAt,
    [SY.finishedMs]: job.finishedAt,
    [SY.canceledMs]: state === "canceled" ? (job.finishedAt ?? now) : null,
  };
}

/**
 * Splits native fields into the legacy columns they belong in (`taskable_id`, `taskable_type`, from
 * `native.workerqueue`) and the rest, the producer's own keys, which go to `sy_native`.
 */
function splitNative(fields: Record<string, unknown>): {
  legacy: Record<string, unknown>;
  native: Record<string, unknown>;
  own: Record<string, unknown>;
} {
  const { [NATIVE_KEY]: ownValue, ...native } = fields;
  const own = ownValue !== null && typeof ownValue === "object" && !Array.isArray(ownValue) ? (ownValue as Record<string, unknown>) : {};
  const legacy: Record<string, unknown> = {};
  if (typeof own.taskable_id === "number" && Number.isInteger(own.taskable_id)) {
    // The legacy column is a 32-bit int.
    if (own.taskable_id < -MAX_ROW_ID - 1 || own.taskable_id > MAX_ROW_ID)
      throw new ValidationError("workerqueue-sql: taskable_id must fit a 32-bit integer");
    legacy.taskable_id = own.taskable_id;
  }
  if (typeof own.taskable_type === "string") legacy.taskable_type = own.taskable_type.slice(0, 255);
  return { legacy, native, own };
}

/** The legacy `duration` column: whole seconds of processing. */
export function durationSeconds(startedMs: number, finishedMs: number): number {
  return Math.max(0, Math.round((finishedMs - startedMs) / 1000));
}

/**
 * A value for the legacy datetime columns. SQLite has no datetime type: write the text that
 * `CURRENT_TIMESTAMP` produces (UTC), so rows from legacy-style inserts and ours read alike.
 */
export function sqlDate(store: Store, ms: number): Date | string {
  const date = new Date(ms);
  return store.dialect === "sqlite" ? date.toISOString().replace("T", " ").slice(0, 19) : date;
}

export function dateMs(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.getTime();
  if (typeof value === "number") return value;
  if (typeof value === "string") {
    // SQLite's CURRENT_TIMESTAMP text is UTC without a zone.
    const ms = Date.parse(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/.test(value) ? `${value.replace(" ", "T")}Z` : value);
    return Number.isNaN(ms) ? null : ms;
  }
  return null;
}

/** A boolean column as the drivers return it (SQLite and MySQL answer 1). */
export function isTrue(value: boolean | number | null | undefined): boolean {
  return value === true || value === 1;
}

/** The delay marker this dialect writes (see MYSQL_DELAYED_LOCK). */
export function delayedLock(store: Store): string {
  return store.dialect === "mysql" ? MYSQL_DELAYED_LOCK : DELAYED_LOCK;
}

/** The dependency marker this dialect writes (see BLOCKED_LOCK). */
export function blockedLock(store: Store): string {
  return store.dialect === "mysql" ? MYSQL_BLOCKED_LOCK : BLOCKED_LOCK;
}

/** The rjqueue `locked` flag to write, when the table has that column (see columns.ts). */
export function rjqueueLocked(store: Store, locked: boolean): Record<string, boolean> {
  return store.layout.rjqueueLocked ? { [RJQUEUE_LOCKED]: locked } : {};
}

export function num(value: number | string | null | undefined): number | null {
  if (value === null || value === undefined) return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

function parseJson<T>(text: string | null | undefined, fallback: T): T {
  if (text === null || text === undefined || text === "") return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}
