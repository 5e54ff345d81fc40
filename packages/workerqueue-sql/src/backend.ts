import {
  type Backend,
  type Capabilities,
  type CompleteOptions,
  type CompletedAndNext,
  DEFAULT_LEASE_MS,
  type DependencyEditing,
  type DependentsLookup,
  type EnqueueInput,
  type EnqueueResult,
  type EventWatch,
  type ExportOptions,
  type FailOptions,
  type HeartbeatOptions,
  type ImportResult,
  type Job,
  type JobCounts,
  type JobEditing,
  type JobEventFeed,
  JobStateSchema,
  type Json,
  type ListOptions,
  type NormalizedEnqueueInput,
  type Page,
  type Recurrence,
  type RecurringJobs,
  type ReserveOptions,
  type RunRelease,
  type StoreEvent,
  ValidationError,
  decodeCursor,
  emptyCounts,
  encodeCursor,
  guardBackend,
  parseOrThrow,
} from "@switchyard/core";
import { rowsOf } from "./bulk-insert.js";
import { type ClaimRequest, claimRows, releaseDueDelayed } from "./claim.js";
import type { JobRow } from "./columns.js";
import { BLOCKED_LOCK, BLOCKED_LOCKS, MARKER_LOCKS, RJQUEUE_LOCKED, SY } from "./columns.js";
import { withRetry } from "./db-errors.js";
import { changeDependencies, dependentsOf, releaseDependents } from "./dependencies.js";
import { replaceJob, setData, setPriority, setTags } from "./editing.js";
import { EnqueueBurst } from "./enqueue-burst.js";
import { enqueueMany, enqueueNormalized, enqueueOne, importJobs } from "./enqueue.js";
import { sqlEventFeed } from "./event-feed.js";
import { GroupedQueueLookup } from "./grouped-lookup.js";
import { findRow, findRows, holdingQueues, queueNamesTable, queuesHoldingArgs, queuesHoldingStatement } from "./lookup.js";
import { MariadbClaimGroup } from "./mariadb-claim.js";
import { type Store, type WorkerQueueBackendOptions, resolveStore } from "./options.js";
import { PostgresClaimGroup } from "./postgres-claim.js";
import { PostgresIdEnqueues } from "./postgres-id-enqueue.js";
import { advanceRecurrence, findRecurrence, putRecurrence, queueRecurrences, removeRecurrence } from "./recurring.js";
import { ReleaseTimer } from "./release-timer.js";
import { ReturningBurstWriter } from "./returning-burst.js";
import { hasDependents, rowToJob, stateOf } from "./row.js";
import { detectLayout, ensureSchema } from "./schema.js";
import { SqliteBurstWriter } from "./sqlite-burst.js";
import { SqliteCycleGroup } from "./sqlite-cycle.js";
import { SqliteQueueLookup } from "./sqlite-lookup.js";
import { cancelJob, completeByTransition, completeJob, failJob, heartbeatJob, releaseJob, setJobProgress } from "./transitions.js";
import { MasterWaker, parseLegacyMaster } from "./wake.js";
import { whereNotActive, whereQueue, whereState } from "./where.js";

export const WORKERQUEUE_CAPABILITIES: Capabilities = {
  delays: true,
  priorities: true,
  dependencies: true,
  tags: true,
  progress: true,
  uniqueKeys: true,
  leases: true,
  pause: true,
  results: true,
  keepsCompleted: true,
  customIds: true,
  editing: true,
};

const MAX_PAGE = 1000;
/** How often the release timer (and, at most, a reserve) frees due delayed rows for legacy daemons. */
const RELEASE_INTERVAL_MS = 1000;

const isAfterCursor = (value: unknown): value is { after: number } =>
  typeof value === "object" &&
  value !== null &&
  Number.isSafeInteger((value as { after?: unknown }).after) &&
  ((value as { after: number }).after as number) >= 0;

/** A Backend over the Worker Queue `jobs` table (taf2/workq, rjqueue) on SQLite, PostgreSQL or MySQL/MariaDB. */
export function createWorkerQueueBackend(options: WorkerQueueBackendOptions): Backend {
  return guardBackend("workerqueue-sql", new WorkerQueueBackend(options));
}

class WorkerQueueBackend implements Backend, DependencyEditing, DependentsLookup, JobEditing, JobEventFeed, RecurringJobs, RunRelease {
  readonly kind: string;
  readonly capabilities = WORKERQUEUE_CAPABILITIES;
  /** PostgreSQL and MariaDB take a migration's two pages at once (about a fifth faster into PostgreSQL and half again into MariaDB, measured); SQLite writes one at a time. */
  readonly importsAtOnce: number;
  private readonly store: Store;
  private readonly ownsKnex: boolean;
  private readonly createSchema: boolean;
  private readying: Promise<void> | undefined;
  private lastRelease = 0;
  /** Wakes legacy masters (workqd, rjqueue) when jobs become runnable; see wake.ts. */
  private readonly waker: MasterWaker;
  private readonly releaseTimer: ReleaseTimer;
  private readonly feed: Required<JobEventFeed>;
  /** SQLite (better-sqlite3) and PostgreSQL: enqueues of one turn of the event loop are written together; see enqueue-burst.ts. */
  private readonly burst: EnqueueBurst | undefined;
  /**
   * PostgreSQL: concurrent claims and completions of one queue go in one statement (postgres-claim.ts);
   * MariaDB: in one script (mariadb-claim.ts); SQLite (better-sqlite3): those of one turn of the event
   * loop in one transaction (sqlite-cycle.ts).
   */
  private readonly claims: PostgresClaimGroup | MariadbClaimGroup | SqliteCycleGroup | undefined;
  /** PostgreSQL: concurrent enqueues with an id of one queue go in one statement; see postgres-id-enqueue.ts. */
  private readonly idEnqueues: PostgresIdEnqueues | undefined;
  /**
   * PostgreSQL: concurrent queuesHolding() look-ups go in one statement; MariaDB and MySQL: in one
   * script (grouped-lookup.ts); SQLite (better-sqlite3): by a statement prepared once, on the
   * connection (sqlite-lookup.ts).
   */
  private readonly lookups: GroupedQueueLookup | SqliteQueueLookup | undefined;

  constructor(options: WorkerQueueBackendOptions) {
    const resolved = resolveStore(options);
    this.store = resolved.store;
    this.ownsKnex = resolved.ownsKnex;
    this.createSchema = resolved.createSchema;
    this.kind = `workerqueue-sql:${this.store.dialect}`;
    this.importsAtOnce = this.store.dialect === "sqlite" ? 1 : 2;
    const onError = options.onBackgroundError ?? (() => {});
    const masters = (options.wakeMasters ?? []).map((master) => (typeof master === "string" ? parseLegacyMaster(master) : master));
    this.waker = new MasterWaker(masters, onError);
    this.releaseTimer = new ReleaseTimer(
      () => releaseDueDelayed(this.store, this.store.now()),
      options.releaseDelayedEveryMs ?? RELEASE_INTERVAL_MS,
      (released) => this.waker.wake(released),
      onError,
    );
    this.feed = sqlEventFeed(this.store, () => this.ready());
    const writer = SqliteBurstWriter.fits(this.store)
      ? new SqliteBurstWriter(this.store)
      : ReturningBurstWriter.fits(this.store)
        ? new ReturningBurstWriter(this.store)
        : undefined;
    this.claims = PostgresClaimGroup.fits(this.store)
      ? new PostgresClaimGroup(this.store)
      : MariadbClaimGroup.fits(this.store)
        ? new MariadbClaimGroup(this.store)
        : SqliteCycleGroup.fits(this.store)
          ? new SqliteCycleGroup(this.store)
          : undefined;
    const ordinary = (queue: string, input: NormalizedEnqueueInput) => enqueueNormalized(this.store, queue, input);
    this.burst = writer && new EnqueueBurst(this.store, writer, ordinary);
    this.idEnqueues = PostgresIdEnqueues.fits(this.store) ? new PostgresIdEnqueues(this.store, ordinary) : undefined;
    this.lookups = GroupedQueueLookup.fits(this.store)
      ? new GroupedQueueLookup(this.store)
      : SqliteQueueLookup.fits(this.store)
        ? new SqliteQueueLookup(this.store)
        : undefined;
  }

  get eventFeed() {
    return this.feed.eventFeed;
  }

  watchEvents(...args: Parameters<JobEventFeed["watchEvents"]>): EventWatch {
    return this.feed.watchEvents(...args);
  }

  eventsAfter(position: string, limit: number): Promise<StoreEvent[]> {
    return this.feed.eventsAfter(position, limit);
  }

  positionAt(time: number): string {
    return this.feed.positionAt(time);
  }

  ready(): Promise<void> {
    this.readying ??= withRetry("ready", () => (this.createSchema ? ensureSchema(this.store) : detectLayout(this.store))).then(
      () => this.releaseTimer.start(),
      (error) => {
        this.readying = undefined;
        throw error;
      },
    );
    return this.readying;
  }

  async close(): Promise<void> {
    this.releaseTimer.stop();
    await this.waker.close();
    if (this.ownsKnex) await this.store.knex.destroy();
  }

  async enqueue(queue: string, input: EnqueueInput): Promise<EnqueueResult> {
    await this.ready();
    const result = await enqueueOne(this.store, queue, input, this.burst, this.idEnqueues);
    this.announce([result]);
    return result;
  }

  async enqueueBulk(queue: string, inputs: EnqueueInput[]): Promise<EnqueueResult[]> {
    await this.ready();
    if (!Array.isArray(inputs)) throw new ValidationError("workerqueue-sql: enqueueBulk takes an array of jobs");
    if (inputs.length === 0) return [];
    const results = await enqueueMany(this.store, queue, inputs);
    this.announce(results);
    return results;
  }

  /** One wake-up per new job a legacy master may run now (delayed ones are announced when released). */
  private announce(results: EnqueueResult[]): void {
    this.waker.wake(results.filter((result) => result.created && result.job.state === "waiting").length);
  }

  async reserve(queue: string, options: ReserveOptions): Promise<Job[]> {
    await this.ready();
    const request = await this.claimRequest(queue, options);
    const rows = this.claims
      ? (await this.claims.claim({ request })).next
      : await withRetry("reserve", () => claimRows(this.store, request));
    return rows.map((row) => rowToJob(this.store, row, request.now));
  }

  /**
   * PostgreSQL (one statement, shared with the queue's concurrent claims: postgres-claim.ts), MariaDB
   * (one script, shared likewise: mariadb-claim.ts) and SQLite (one transaction, shared with the
   * turn's: sqlite-cycle.ts): one call completes the job and claims the worker's next; elsewhere, or
   * when the completion is refused (to name the error), complete() then reserve().
   */
  async completeAndReserve(queue: string, id: string, options: CompleteOptions, next: ReserveOptions): Promise<CompletedAndNext> {
    await this.ready();
    const request = await this.claimRequest(queue, next);
    const both = this.claims && (await this.claims.claim({ request, complete: { id, options } }));
    if (both?.completed) {
      const completed = await this.released(queue, rowToJob(this.store, both.completed));
      return { completed, next: both.next.map((row) => rowToJob(this.store, row, request.now)) };
    }
    const completed = await this.released(queue, await completeJob(this.store, queue, id, options));
    return { completed, next: await this.reserve(queue, next) };
  }

  /** A completed job, once the jobs that waited for it alone are released (dependencies.ts); only a marked parent looks. */
  private async released(queue: string, completed: Job): Promise<Job> {
    if (hasDependents(completed))
      this.waker.wake(await withRetry("release dependents", () => releaseDependents(this.store, queue, [completed.id])));
    return completed;
  }

  /** Checks a reserve's options; frees due delayed rows for legacy daemons, at most once a second. */
  private async claimRequest(queue: string, options: ReserveOptions): Promise<ClaimRequest> {
    const count = options.count ?? 1;
    const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    if (typeof options.worker !== "string" || options.worker.length === 0 || options.worker.length > 255) {
      throw new ValidationError("workerqueue-sql: reserve needs a worker name of 1 to 255 characters");
    }
    if (!Number.isInteger(count) || count < 1 || count > MAX_PAGE)
      throw new ValidationError(`workerqueue-sql: count must be 1..${MAX_PAGE}`);
    if (!Number.isInteger(leaseMs) || leaseMs < 1) throw new ValidationError("workerqueue-sql: leaseMs must be a positive integer");
    const now = this.store.now();
    // Paced by real time; what is due to release follows the backend's clock.
    const wall = Date.now();
    if (wall - this.lastRelease >= RELEASE_INTERVAL_MS) {
      this.lastRelease = wall;
      const released = await withRetry("reserve", () => releaseDueDelayed(this.store, now));
      this.waker.wake(released);
    }
    // The claim looks at the pause itself, in the same statement (claim.ts).
    return { queue, worker: options.worker, count, leaseMs, now };
  }

  async heartbeat(queue: string, id: string, options: HeartbeatOptions): Promise<Job> {
    await this.ready();
    return heartbeatJob(this.store, queue, id, options);
  }

  /** PostgreSQL, MariaDB and SQLite: in the group claim (a claim of no rows), so concurrent completions share a statement, a script or a transaction. */
  async complete(queue: string, id: string, options: CompleteOptions = {}): Promise<Job> {
    await this.ready();
    if (!this.claims) return this.released(queue, await completeJob(this.store, queue, id, options));
    const request = { queue, worker: "", count: 0, leaseMs: 0, now: this.store.now() };
    const { completed } = await this.claims.claim({ request, complete: { id, options } });
    return this.released(queue, completed ? rowToJob(this.store, completed) : await completeByTransition(this.store, queue, id, options));
  }

  async fail(queue: string, id: string, options: FailOptions): Promise<Job> {
    await this.ready();
    return failJob(this.store, queue, id, options);
  }

  async cancel(queue: string, id: string): Promise<void> {
    await this.ready();
    return cancelJob(this.store, queue, id);
  }

  async setProgress(queue: string, id: string, options: { worker?: string; progress: Json }): Promise<Job> {
    await this.ready();
    return setJobProgress(this.store, queue, id, options.worker, options.progress);
  }

  async setPriority(queue: string, id: string, priority: number): Promise<Job> {
    await this.ready();
    return setPriority(this.store, queue, id, priority);
  }

  async setTags(queue: string, id: string, tags: string[]): Promise<Job> {
    await this.ready();
    return setTags(this.store, queue, id, tags);
  }

  async release(queue: string, id: string, options: { worker: string }): Promise<Job> {
    await this.ready();
    return releaseJob(this.store, queue, id, options.worker);
  }

  async setData(queue: string, id: string, data: Json): Promise<Job> {
    await this.ready();
    return setData(this.store, queue, id, data);
  }

  async dependentsOf(queue: string, ids: string[]): Promise<Map<string, string[]>> {
    await this.ready();
    return withRetry("dependentsOf", () => dependentsOf(this.store, queue, ids));
  }

  async addDependencies(queue: string, id: string, parents: string[]): Promise<Job> {
    await this.ready();
    return withRetry("addDependencies", () => changeDependencies(this.store, queue, id, (now) => [...now, ...parents]));
  }

  async removeDependencies(queue: string, id: string, parents: string[] | "all"): Promise<Job> {
    await this.ready();
    const removed = parents === "all" ? () => [] : (now: string[]) => now.filter((parent) => !parents.includes(parent));
    const job = await withRetry("removeDependencies", () => changeDependencies(this.store, queue, id, removed));
    if (job.state === "waiting") this.waker.wake(1);
    return job;
  }

  async putRecurrence(recurrence: Recurrence): Promise<void> {
    await this.ready();
    await withRetry("putRecurrence", () => putRecurrence(this.store, recurrence));
  }

  async recurrence(id: string): Promise<Recurrence | null> {
    await this.ready();
    return withRetry("recurrence", () => findRecurrence(this.store, id));
  }

  async recurrences(queue: string): Promise<Recurrence[]> {
    await this.ready();
    return withRetry("recurrences", () => queueRecurrences(this.store, queue));
  }

  async removeRecurrence(id: string): Promise<boolean> {
    await this.ready();
    return withRetry("removeRecurrence", () => removeRecurrence(this.store, id));
  }

  async advanceRecurrence(id: string, seen: number, count: number, nextAt: number): Promise<boolean> {
    await this.ready();
    return withRetry("advanceRecurrence", () => advanceRecurrence(this.store, id, seen, count, nextAt));
  }

  async replace(queue: string, id: string, input: EnqueueInput): Promise<Job> {
    await this.ready();
    const job = await replaceJob(this.store, queue, id, input);
    if (job.state === "waiting") this.waker.wake(1);
    return job;
  }

  async get(queue: string, id: string): Promise<Job | null> {
    await this.ready();
    const row = await withRetry("get", () => findRow(this.store, this.store.knex, queue, id));
    return row ? rowToJob(this.store, row) : null;
  }

  async getMany(queue: string, ids: string[]): Promise<Array<Job | null>> {
    await this.ready();
    const rows = await withRetry("getMany", () => findRows(this.store, this.store.knex, queue, ids));
    return ids.map((id) => {
      const row = rows.get(id);
      return row ? rowToJob(this.store, row) : null;
    });
  }

  /** Deletes the rows of these ids that no worker holds (JobRemoval); answers the ids deleted. */
  async remove(queue: string, ids: string[]): Promise<string[]> {
    await this.ready();
    return withRetry("remove", () =>
      this.store.knex.transaction(async (trx) => {
        const rows = await findRows(this.store, trx, queue, ids);
        const byRowId = new Map([...rows].map(([id, row]) => [Number(row.id), id]));
        if (byRowId.size === 0) return [];
        const query = trx(this.store.table).whereIn("id", [...byRowId.keys()]);
        // The state test is in the DELETE itself: a row a worker took since it was read stays.
        whereNotActive(this.store, query);
        await query.delete();
        const left = await trx(this.store.table)
          .whereIn("id", [...byRowId.keys()])
          .select("id");
        const kept = new Set(left.map((row: { id: number | string }) => Number(row.id)));
        return [...byRowId].filter(([rowId]) => !kept.has(rowId)).map(([, id]) => id);
      }),
    );
  }

  async list(queue: string, options: ListOptions): Promise<Page<Job>> {
    await this.ready();
    const state = parseOrThrow(JobStateSchema, options.state, "state");
    const now = this.store.now();
    return this.page(queue, options, (query) => whereState(this.store, query, state, now));
  }

  async counts(queue: string): Promise<JobCounts> {
    await this.ready();
    const now = this.store.now();
    const { knex, table } = this.store;
    const query = knex(table)
      .select("status")
      .select(knex.raw("case when ?? > ? then 1 else 0 end as is_delayed", [SY.runAt, now]))
      .select(knex.raw("case when ?? is not null then 1 else 0 end as is_canceled", [SY.canceledMs]))
      .select(
        this.store.layout.rjqueueLocked
          ? knex.raw(`case when ?? = ? and ?? not in (${MARKER_LOCKS.map(() => "?").join(", ")}) then 1 else 0 end as is_held`, [
              RJQUEUE_LOCKED,
              true,
              "locked_queue_id",
              ...MARKER_LOCKS,
            ])
          : knex.raw("0 as is_held"),
      )
      .select(
        knex.raw(`case when ?? in (${BLOCKED_LOCKS.map(() => "?").join(", ")}) then 1 else 0 end as is_blocked`, [
          "locked_queue_id",
          ...BLOCKED_LOCKS,
        ]),
      )
      .count({ n: "*" });
    whereQueue(this.store, query, queue);
    const groups = await withRetry("counts", () => query.groupByRaw("1, 2, 3, 4, 5"));
    const counts = emptyCounts();
    for (const group of groups as Array<{
      status: string | null;
      is_delayed: unknown;
      is_canceled: unknown;
      is_held: unknown;
      is_blocked: unknown;
      n: unknown;
    }>) {
      // stateOf() decides, so counts can never disagree with get() and list().
      const state = stateOf(
        {
          status: group.status,
          sy_run_at: Number(group.is_delayed) === 1 ? now + 1 : null,
          sy_canceled_ms: Number(group.is_canceled) === 1 ? now : null,
          locked: Number(group.is_held) === 1,
          locked_queue_id: Number(group.is_blocked) === 1 ? BLOCKED_LOCK : "",
        } as JobRow,
        now,
      );
      counts[state] += Number(group.n);
    }
    return counts;
  }

  /** The queue names (queueNamesTable); rows without a queue are the default queue's. */
  async queues(): Promise<string[]> {
    await this.ready();
    const { knex, table, defaultQueue } = this.store;
    const [named, unnamed] = await withRetry("queues", () =>
      Promise.all([knex.raw(`${queueNamesTable(this.store)} select name from names where name is not null`), this.#unnamed()]),
    );
    const names = (rowsOf(this.store, named) as unknown as Array<{ name: string }>).map((row) => String(row.name));
    if (unnamed !== undefined && !names.includes(defaultQueue)) names.push(defaultQueue);
    return names.sort();
  }

  /**
   * The queues that hold a job under `id` (JobLookup), by one statement (queuesHoldingStatement):
   * grouped with concurrent look-ups on PostgreSQL and the MySQL family (grouped-lookup.ts), through
   * a statement prepared on the connection on SQLite (sqlite-lookup.ts).
   */
  async queuesHolding(id: string): Promise<string[]> {
    await this.ready();
    if (this.lookups) return this.lookups.queuesHolding(id);
    const { byRowId, bindings } = queuesHoldingArgs(id);
    const sql = queuesHoldingStatement(this.store, byRowId);
    const found = await withRetry("queuesHolding", () => this.store.knex.raw(sql, bindings));
    return holdingQueues(this.store, rowsOf(this.store, found) as unknown as Array<{ name: string | null }>);
  }

  /** A row without a queue (Worker Queue's own producers write none: the default queue's), or undefined. */
  #unnamed() {
    return this.store.knex(this.store.table).whereNull(SY.queue).first(this.store.knex.raw("1 as found"));
  }

  async pause(queue: string): Promise<void> {
    await this.ready();
    const { knex, pausedTable } = this.store;
    await withRetry("pause", () => knex(pausedTable).insert({ queue: queue, paused_ms: this.store.now() }).onConflict("queue").ignore());
  }

  async resume(queue: string): Promise<void> {
    await this.ready();
    await withRetry("resume", () => this.store.knex(this.store.pausedTable).where("queue", queue).delete());
  }

  async isPaused(queue: string): Promise<boolean> {
    await this.ready();
    const row = await withRetry("isPaused", () => this.store.knex(this.store.pausedTable).where("queue", queue).first());
    return row !== undefined;
  }

  async export(queue: string, options: ExportOptions = {}): Promise<Page<Job>> {
    await this.ready();
    return this.page(queue, options, (query) => query);
  }

  async import(queue: string, jobs: Job[]): Promise<ImportResult> {
    await this.ready();
    if (!Array.isArray(jobs)) throw new ValidationError("workerqueue-sql: import takes an array of jobs");
    return importJobs(this.store, queue, jobs);
  }

  /** Keyset pages in row order: stable while jobs are added or change state. */
  private async page(
    queue: string,
    options: { limit?: number; cursor?: string },
    filter: (query: import("knex").Knex.QueryBuilder) => import("knex").Knex.QueryBuilder,
  ): Promise<Page<Job>> {
    const limit = options.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
      throw new ValidationError(`workerqueue-sql: limit must be 1..${MAX_PAGE}`);
    const after = decodeCursor(options.cursor, isAfterCursor)?.after ?? 0;
    const query = this.store.knex(this.store.table).select("*").where("id", ">", after);
    whereQueue(this.store, query, queue);
    filter(query);
    const rows = (await withRetry("list", () => query.orderBy("id", "asc").limit(limit + 1))) as JobRow[];
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    const now = this.store.now();
    return {
      items: items.map((row) => rowToJob(this.store, row, now)),
      cursor: rows.length > limit && last ? encodeCursor({ after: Number(last.id) }) : null,
    };
  }
}
