/**
 * Names and values of the Worker Queue `jobs` layout. Legacy columns keep the names and meanings of
 * taf2/workq; every column Switchyard adds starts with `sy_`, so no legacy reader can mistake it for
 * one of its own, and every added column is nullable or has a default, so a legacy INSERT that names
 * only the legacy columns still works.
 */

/** The status strings both legacy daemons write (never `completed`). */
export const STATUS = {
  pending: "pending",
  loading: "loading",
  processing: "processing",
  complete: "complete",
  error: "error",
} as const;

/** The statuses of a completed job: `completed` is the stale README's word; no daemon writes it, but a hand-written row might. */
export const COMPLETE_STATUSES: string[] = [STATUS.complete, "completed"];

/** The statuses a legacy or Switchyard worker holds a job in. */
export const ACTIVE_STATUSES = [STATUS.loading, STATUS.processing];

/** `locked_queue_id` of a job nobody holds: the legacy convention. */
export const UNLOCKED = "";
/**
 * `locked_queue_id` of a pending job that is not yet due (delayed, or waiting out a retry backoff).
 * The legacy claim only takes rows whose lock is '', so a legacy daemon cannot run it early; a
 * Switchyard reserve() clears the marker of every job that has become due.
 */
export const DELAYED_LOCK = "sy:delayed";
/**
 * The delay marker on MySQL/MariaDB: workqd's idle poll compares `locked_queue_id=0` as a number
 * there, and `'sy:delayed'` converts to 0, so delayed rows kept the daemon awake; this one converts
 * to 1. (PostgreSQL and SQLite never compare the lock as a number, so they keep `sy:delayed`.)
 */
export const MYSQL_DELAYED_LOCK = "1:sy:delayed";
/** Every delay marker, read on every dialect (MySQL rows written before MYSQL_DELAYED_LOCK hold the first). */
export const DELAYED_LOCKS = [DELAYED_LOCK, MYSQL_DELAYED_LOCK];
/**
 * `locked_queue_id` of a pending job waiting for the jobs in `sy_depends_on` to complete (core state
 * `blocked`): like the delay marker, it keeps legacy daemons from taking the row; the completion of
 * its last unfinished parent clears it (dependencies.ts). MySQL's spelling converts to 1, as
 * MYSQL_DELAYED_LOCK does, so workqd's idle poll does not count it as pending.
 */
export const BLOCKED_LOCK = "sy:blocked";
export const MYSQL_BLOCKED_LOCK = "1:sy:blocked";
export const BLOCKED_LOCKS = [BLOCKED_LOCK, MYSQL_BLOCKED_LOCK];
/** The markers Switchyard writes in `locked_queue_id` of a pending row no worker holds. */
export const MARKER_LOCKS = [...DELAYED_LOCKS, ...BLOCKED_LOCKS];
/** Prefix of the lock ids Switchyard claims with, so a lock shows who took the row. */
export const CLAIM_LOCK_PREFIX = "sy:";

/**
 * rjqueue's variant of the table has a boolean `locked` (true while a Ruby worker holds the row)
 * instead of `locked_queue_id`. When ready() finds it, Switchyard keeps it in step: true while it
 * holds a row or a row is delayed or blocked, false otherwise, so rjqueue's `status='pending' and locked=0`
 * selection and Switchyard's claim never take the same row.
 */
export const RJQUEUE_LOCKED = "locked";

/** Columns Switchyard adds to the legacy layout. */
export const SY = {
  /** Queue name; NULL for legacy rows, which belong to the `defaultQueue` option. */
  queue: "sy_queue",
  /** A caller-chosen or imported job id; NULL when the id is the row's integer `id`. */
  jobId: "sy_job_id",
  priority: "sy_priority",
  /** Epoch ms when a pending job becomes due; NULL means at once. */
  runAt: "sy_run_at",
  /** Lease holder and expiry (epoch ms) of a job Switchyard handed out; NULL for legacy claims. */
  worker: "sy_worker",
  leaseUntil: "sy_lease_until",
  maxAttempts: "sy_max_attempts",
  /** JSON of the core backoff policy. */
  backoff: "sy_backoff",
  /** The job's unique key, as recorded (kept after the job finished). */
  uniqueKey: "sy_unique_key",
  /**
   * The unique key while the job holds it (NULL once finished): the unique index is on this column,
   * so a key is free for a new job once the old one completed, failed for good or was canceled.
   */
  uniqueSlot: "sy_unique_slot",
  result: "sy_result",
  progress: "sy_progress",
  errorGroup: "sy_error_group",
  /** JSON array of tags. */
  tags: "sy_tags",
  /** JSON array of the job ids of the same queue this job waits for (NULL: none). */
  dependsOn: "sy_depends_on",
  /**
   * True once a job of the queue was enqueued blocked on this one: its completion then looks for
   * the dependents to release (dependencies.ts), which no other completion pays for.
   */
  hasDependents: "sy_has_dependents",
  /** JSON object of fields with no Worker Queue meaning (a qless or glide-mq job's extras). */
  native: "sy_native",
  /** Epoch ms timestamps; `created_at` (a datetime) is still written for legacy readers. */
  createdMs: "sy_created_ms",
  startedMs: "sy_started_ms",
  finishedMs: "sy_finished_ms",
  /** Set when a job was canceled; its status is then `error`, which legacy daemons leave alone. */
  canceledMs: "sy_canceled_ms",
} as const;

/** Every column a row may hold, as the driver returns it. */
export interface JobRow {
  id: number | string;
  name: string;
  data: string | null;
  status: string | null;
  created_at: unknown;
  updated_at: unknown;
  duration?: number | null;
  taskable_id?: number | null;
  taskable_type?: string | null;
  details: string | null;
  locked_queue_id: string | null;
  /** Only in rjqueue-layout tables. */
  locked?: boolean | number | null;
  attempts: number | null;
  sy_queue: string | null;
  sy_job_id: string | null;
  sy_priority: number | string | null;
  sy_run_at: number | string | null;
  sy_worker: string | null;
  sy_lease_until: number | string | null;
  sy_max_attempts: number | null;
  sy_backoff: string | null;
  sy_unique_key: string | null;
  sy_unique_slot?: string | null;
  sy_result: string | null;
  sy_progress: string | null;
  sy_error_group: string | null;
  sy_tags: string | null;
  sy_depends_on?: string | null;
  sy_has_dependents?: boolean | number | null;
  sy_native: string | null;
  sy_created_ms: number | string | null;
  sy_started_ms: number | string | null;
  sy_finished_ms: number | string | null;
  sy_canceled_ms: number | string | null;
}

/** The largest value of the legacy `int(11)` id column; larger numeric ids can only be `sy_job_id`s. */
export const MAX_ROW_ID = 2_147_483_647;
