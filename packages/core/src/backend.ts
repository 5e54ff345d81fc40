import type { EnqueueInput, Job, JobError, JobState, Json } from "./job.js";

/**
 * What a backend can honour. A door or the migration engine checks these before asking; a backend
 * that is asked anyway throws UnsupportedError. The conformance suite skips, with the reason
 * printed, the rules a backend declares it cannot keep.
 */
export interface Capabilities {
  /** Jobs may be enqueued with a delay or run-at time, and retries wait out a backoff. */
  delays: boolean;
  /** Priority changes the reserve order. */
  priorities: boolean;
  /** Jobs may depend on other jobs (state `blocked` until they complete). */
  dependencies: boolean;
  tags: boolean;
  /** Workers may report progress on an active job. */
  progress: boolean;
  /** A unique key makes a second enqueue return the first job. */
  uniqueKeys: boolean;
  /** Reserved jobs carry a lease that expires and gives the job back. */
  leases: boolean;
  pause: boolean;
  /** complete() stores a result on the job. */
  results: boolean;
  /** Completed jobs stay readable (get/list) rather than being removed at once. */
  keepsCompleted: boolean;
  /** Callers may choose job ids at enqueue. */
  customIds: boolean;
  /** A job's priority and tags may change after enqueue, and a job may be put again as new (the JobEditing interface). */
  editing: boolean;
}

export interface EnqueueResult {
  job: Job;
  /** False when a job with the same unique key (or id) already existed and was returned instead. */
  created: boolean;
}

export interface ReserveOptions {
  /** Who holds the lease; heartbeat, complete and fail from anyone else are refused. */
  worker: string;
  /** How many jobs to claim at most; default 1. */
  count?: number;
  /** Lease length in milliseconds; default DEFAULT_LEASE_MS. */
  leaseMs?: number;
}

export interface HeartbeatOptions {
  worker: string;
  leaseMs?: number;
  progress?: Json;
}

export interface CompleteOptions {
  /** When given, the call is refused unless this worker holds the lease; when omitted, anyone may complete (Cloudq's DELETE). */
  worker?: string;
  result?: Json;
}

/** What completeAndReserve answers: the completed job, then the jobs now leased to the worker (none when nothing was due). */
export interface CompletedAndNext {
  completed: Job;
  next: Job[];
}

export interface FailOptions {
  worker?: string;
  error: JobError;
  /** false fails for good at once; otherwise the job retries while attempts < maxAttempts. */
  retry?: boolean;
  /** Overrides the job's backoff for this retry, in milliseconds. */
  retryDelay?: number;
}

export interface ListOptions {
  state: JobState;
  /** Page size; default 100. */
  limit?: number;
  /** Opaque cursor from a previous page; omitted for the first page. */
  cursor?: string;
}

export interface Page<T> {
  items: T[];
  /** Pass back to get the next page; null on the last page. */
  cursor: string | null;
  /**
   * Set on every page of an export that may hand a job out on more than one page (one that scans a
   * keyspace which can grow meanwhile); readers that count jobs then skip the ids they have seen.
   */
  mayRepeat?: boolean;
}

export interface ExportOptions {
  limit?: number;
  cursor?: string;
}

/** What a store holds of a job, as far as a migration checks it (see jobDigest, contentDigest). A Job is one. */
export type HeldJob = Pick<Job, "id" | "name" | "data" | "state" | "priority" | "attempts" | "runAt" | "createdAt">;

export interface ImportResult {
  imported: number;
  /** Ids that already existed in the target queue and were left alone (so a migration can resume). */
  skipped: string[];
  /**
   * Optional: each job as the store holds it once the import is done, in the order given (null where
   * the queue holds none), never echoed from the input: read from the stored records by the same
   * atomic call (or pipeline) that wrote them, or, for a record that call wrote, mapped from the native
   * record it wrote as the store's reads map a stored one. migrateQueue then checks the page without reading it back.
   */
  held?: Array<HeldJob | null>;
}

export type JobCounts = Record<JobState, number>;

/**
 * The contract every adapter implements. Every claim is atomic in the storage server, so any number
 * of gateway processes may share one backend. Operations name the queue because several native
 * layouts (glide-mq, Cloudq) scope ids by queue.
 */
export interface Backend {
  /** A short name for messages and metrics, e.g. `workerqueue-sql:postgres`. */
  readonly kind: string;
  readonly capabilities: Capabilities;
  /**
   * Optional: how many import() calls the store works on at once to advantage (a SQL server takes
   * each in a process of its own; a Redis server or an SQLite file takes one at a time, and two at
   * once only interleave). migrateQueue writes two pages at once where this is 2 or more (default 1).
   */
  readonly importsAtOnce?: number;

  /** Connects and creates what the layout needs (tables, indexes, scripts); idempotent. */
  ready(): Promise<void>;
  close(): Promise<void>;

  enqueue(queue: string, input: EnqueueInput): Promise<EnqueueResult>;
  /** All-or-nothing: a bad item rejects the whole batch before anything is written. */
  enqueueBulk(queue: string, inputs: EnqueueInput[]): Promise<EnqueueResult[]>;

  /** Claims up to `count` due jobs in priority then FIFO order; expired leases come back first. */
  reserve(queue: string, options: ReserveOptions): Promise<Job[]>;
  /** Extends the lease; LeaseLostError when the worker no longer holds it. */
  heartbeat(queue: string, id: string, options: HeartbeatOptions): Promise<Job>;
  complete(queue: string, id: string, options?: CompleteOptions): Promise<Job>;
  /**
   * Optional: completes the job and reserves the same worker's next jobs in one round trip, as
   * glide-mq's completeAndFetchNext does, so a busy worker pays one call per job. Callers use core's
   * completeAndReserve(), which falls back to complete() then reserve() where a store has no such call.
   */
  completeAndReserve?(queue: string, id: string, options: CompleteOptions, next: ReserveOptions): Promise<CompletedAndNext>;
  /** Retries with backoff while attempts remain (state `delayed` or `waiting`), else `failed`. */
  fail(queue: string, id: string, options: FailOptions): Promise<Job>;
  /** Withdraws a job that is not finished; NotFoundError when there is none. */
  cancel(queue: string, id: string): Promise<void>;

  get(queue: string, id: string): Promise<Job | null>;
  /** Optional: the jobs of these ids, in their order (null where there is none), in one round trip where the store allows. */
  getMany?(queue: string, ids: string[]): Promise<Array<Job | null>>;
  list(queue: string, options: ListOptions): Promise<Page<Job>>;
  counts(queue: string): Promise<JobCounts>;
  queues(): Promise<string[]>;

  pause(queue: string): Promise<void>;
  resume(queue: string): Promise<void>;
  isPaused(queue: string): Promise<boolean>;

  /** Every job of the queue in every state, page by page, in a stable order. */
  export(queue: string, options?: ExportOptions): Promise<Page<Job>>;
  /**
   * Writes jobs as they are: ids, states, attempts, timestamps and native fields kept. An `active`
   * job arrives as `waiting` (its lease belongs to the old store) with its attempts kept.
   */
  import(queue: string, jobs: Job[]): Promise<ImportResult>;

  /** Optional: record progress on an active job (capability `progress`). */
  setProgress?(queue: string, id: string, options: { worker?: string; progress: Json }): Promise<Job>;
}

/** Completes the job and reserves the worker's next ones: in one call where the backend has completeAndReserve, else two. */
export async function completeAndReserve(
  backend: Backend,
  queue: string,
  id: string,
  options: CompleteOptions,
  next: ReserveOptions,
): Promise<CompletedAndNext> {
  if (backend.completeAndReserve) return backend.completeAndReserve(queue, id, options, next);
  const completed = await backend.complete(queue, id, options);
  return { completed, next: await backend.reserve(queue, next) };
}

export function emptyCounts(): JobCounts {
  return { waiting: 0, delayed: 0, active: 0, completed: 0, failed: 0, canceled: 0, blocked: 0 };
}
