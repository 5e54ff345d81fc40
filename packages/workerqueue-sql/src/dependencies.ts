import { InvalidStateError, type Job, NotFoundError } from "@switchyard/core";
import type { Knex } from "knex";
import { quoted } from "./bulk-insert.js";
import { BLOCKED_LOCKS, COMPLETE_STATUSES, type JobRow, STATUS, SY, UNLOCKED } from "./columns.js";
import { type Db, findRow, findRows } from "./lookup.js";
import type { Store } from "./options.js";
import { blockedLock, delayedLock, isTrue, jobIdOf, num, rjqueueLocked, rowToJob, sqlDate, stateOf } from "./row.js";

/**
 * Job dependencies on a Worker Queue table. A job that depends on jobs of its queue which have not
 * completed is written pending with the blocked marker in `locked_queue_id` (BLOCKED_LOCK), so no
 * daemon and no claim takes it, and its parents' ids in `sy_depends_on`. Each such parent is marked
 * `sy_has_dependents` in the same transaction; the completion of a marked job looks for the blocked
 * jobs that wait for it and releases those whose parents have all completed. A parent the queue no
 * longer holds counts as completed; a failed or canceled one keeps its dependents blocked until it
 * is retried and completes, as qless and the Cloudq adapter do. A parent completed by a legacy
 * daemon (which knows nothing of the marks) releases nothing.
 */

const isComplete = (row: JobRow) => COMPLETE_STATUSES.includes(row.status ?? "");

/**
 * Marks the parents of a job about to be inserted in `trx` that have not completed; true when there
 * was one, and the job is then written blocked. Each parent's guarded UPDATE takes its row lock
 * until the insert commits: a completion racing with it either came first (the parent is complete
 * when read here, and the job does not wait for it) or waits for this transaction, then finds the
 * mark and releases the job. Parents are taken in one order, so two such enqueues cannot deadlock.
 */
export async function markUnfinishedParents(
  store: Store,
  trx: Knex.Transaction,
  queue: string,
  parents: readonly string[],
): Promise<boolean> {
  let blocked = false;
  for (const parent of [...new Set(parents)].sort()) {
    const found = await findRow(store, trx, queue, parent);
    if (!found) continue;
    await trx(store.table)
      .where("id", found.id)
      .where((q) => q.whereNull("status").orWhereNotIn("status", COMPLETE_STATUSES))
      .update({ [SY.hasDependents]: true });
    // Read again past this transaction's snapshot (MySQL's is older than the UPDATE): the row as locked.
    const read = trx(store.table).where("id", found.id);
    const [now] = (await (store.dialect === "mysql" ? read.forShare() : read)) as JobRow[];
    if (now && !isComplete(now) && isTrue(now.sy_has_dependents)) blocked = true;
  }
  return blocked;
}

/**
 * After `completed` (job ids of `queue`) completed: each blocked job of the queue that waits for one
 * of them and for nothing unfinished any more becomes pending (delayed when its run-at time is still
 * ahead). Run after the completion committed, so a later completion of another parent sees it. The
 * UPDATE is guarded by the marker: two completions releasing one job release it once. Answers how
 * many jobs became runnable at once (the legacy daemons' wake-up count).
 */
export async function releaseDependents(store: Store, queue: string, completed: readonly string[]): Promise<number> {
  let runnable = 0;
  for (const row of await blockedOn(store, store.knex, queue, completed))
    if ((await releaseIfReady(store, queue, row)) === "runnable") runnable++;
  return runnable;
}

/**
 * A blocked row (id, sy_depends_on, sy_run_at) made pending when none of its parents is unfinished
 * any more; "runnable" when it may run at once, "delayed" when its run-at time is ahead, null when
 * it still waits (or someone else released it).
 */
export async function releaseIfReady(store: Store, queue: string, row: JobRow): Promise<"runnable" | "delayed" | null> {
  const found = await findRows(store, store.knex, queue, dependsOnOf(row));
  if ([...found.values()].some((parent) => !isComplete(parent))) return null;
  const now = store.now();
  const runAt = num(row.sy_run_at);
  const delayed = runAt !== null && runAt > now;
  const released = await store
    .knex(store.table)
    .where("id", row.id)
    .where("status", STATUS.pending)
    .whereIn("locked_queue_id", BLOCKED_LOCKS)
    .update({
      locked_queue_id: delayed ? delayedLock(store) : UNLOCKED,
      ...rjqueueLocked(store, delayed),
      updated_at: sqlDate(store, now),
    });
  if (Number(released) === 0) return null;
  return delayed ? "delayed" : "runnable";
}

/**
 * The marks of a job rewritten in place (a re-put), in a transaction of their own: the rewrite
 * cannot share it (a guarded update that reads first). A parent completing between the two finds
 * no blocked job to release, so the caller, once the job is written blocked, asks releaseIfReady()
 * again: one of the two then sees the other's write.
 */
export function markParentsNow(store: Store, queue: string, parents: readonly string[]): Promise<boolean> {
  return store.knex.transaction((trx) => markUnfinishedParents(store, trx, queue, parents));
}

/** DependentsLookup: for each of `ids`, the blocked jobs of the queue that wait for it, in row order. */
export async function dependentsOf(store: Store, queue: string, ids: readonly string[]): Promise<Map<string, string[]>> {
  const wanted = new Set(ids);
  const dependents = new Map<string, string[]>();
  for (const row of await blockedOn(store, store.knex, queue, ids)) {
    for (const parent of dependsOnOf(row)) {
      if (!wanted.has(parent)) continue;
      dependents.set(parent, [...(dependents.get(parent) ?? []), jobIdOf(row)]);
    }
  }
  return dependents;
}

/**
 * DependencyEditing: the blocked job's parents changed to `change(its parents)`, in one transaction
 * that marks (and row-locks) every parent it still waits for, as an enqueue does: a parent's
 * completion then either comes first (and is not waited for) or finds the job waiting for it. Waiting
 * for no unfinished parent, the job becomes waiting at once, delay dropped (qless's `depends off`).
 * Its UPDATE is guarded by the blocked marker, so a job released meanwhile is reported as it is.
 */
export async function changeDependencies(store: Store, queue: string, id: string, change: (parents: string[]) => string[]): Promise<Job> {
  const row = await store.knex.transaction(async (trx) => {
    const found = await findRow(store, trx, queue, id, true);
    if (!found) throw new NotFoundError(`workerqueue-sql: no job ${id} in queue ${queue}`, { queue, id });
    const state = stateOf(found, store.now());
    if (state !== "blocked") {
      throw new InvalidStateError(`workerqueue-sql: cannot change the dependencies of job ${id}: it is ${state}`, { queue, id, state });
    }
    // Only unfinished parents are kept, as qless keeps them in its set (and drops each as it completes).
    const parents: string[] = [];
    for (const parent of [...new Set(change(dependsOnOf(found)))].sort()) {
      if (await markUnfinishedParents(store, trx, queue, [parent])) parents.push(parent);
    }
    const released = parents.length > 0 ? {} : { locked_queue_id: UNLOCKED, [SY.runAt]: null, ...rjqueueLocked(store, false) };
    await trx(store.table)
      .where("id", found.id)
      .where("status", STATUS.pending)
      .whereIn("locked_queue_id", BLOCKED_LOCKS)
      .update({
        [SY.dependsOn]: parents.length > 0 ? JSON.stringify(parents) : null,
        ...released,
        updated_at: sqlDate(store, store.now()),
      });
    return findRow(store, trx, queue, id, true);
  });
  if (!row) throw new NotFoundError(`workerqueue-sql: no job ${id} in queue ${queue}`, { queue, id });
  return rowToJob(store, row);
}

/** Up to this many parents, blockedOn() lets the server filter by LIKE; past it (an import's page), the rows are filtered here. */
const MOST_LIKES = 20;

/**
 * The blocked jobs of a queue that list one of `parents`. The read names only what workq's own
 * (status, locked_queue_id) index holds, the table's blocked rows, plus a LIKE per parent (for a
 * few); the queue and the parsed list are checked here. Given the queue too, PostgreSQL read a
 * table it had not analyzed through the claim index instead: every pending row of the queue, at
 * every page of a migration into it.
 */
async function blockedOn(store: Store, db: Db, queue: string, parents: readonly string[]): Promise<JobRow[]> {
  if (parents.length === 0) return [];
  const query = blockedRows(store, db).select("id", SY.queue, SY.jobId, SY.dependsOn, SY.runAt).orderBy("id");
  if (parents.length <= MOST_LIKES) {
    const column = quoted(store, SY.dependsOn);
    query.whereRaw(
      `(${parents.map(() => `${column} like ? escape '!'`).join(" or ")})`,
      parents.map((parent) => `%${likeEscaped(JSON.stringify(parent))}%`),
    );
  }
  const wanted = new Set(parents);
  return ((await query) as JobRow[]).filter(
    (row) => (row.sy_queue ?? store.defaultQueue) === queue && dependsOnOf(row).some((parent) => wanted.has(parent)),
  );
}

/**
 * The table's blocked rows (see blockedOn), by the one marker this dialect writes: given both
 * spellings, PostgreSQL read every pending row in the index and filtered the marker.
 */
function blockedRows(store: Store, db: Db): Knex.QueryBuilder {
  return db(store.table).where("status", STATUS.pending).where("locked_queue_id", blockedLock(store));
}

function likeEscaped(text: string): string {
  return text.replace(/[!%_]/g, (character) => `!${character}`);
}

function dependsOnOf(row: JobRow): string[] {
  try {
    const parsed = JSON.parse(row.sy_depends_on ?? "[]");
    return Array.isArray(parsed) ? parsed.map(String) : [];
  } catch {
    return [];
  }
}

/**
 * Marks, in an import's transaction, the jobs whose completion must release a blocked job: the
 * parents of the imported blocked jobs that the queue holds, and the imported jobs that blocked
 * jobs already in the queue wait for (a migration may bring a child before its parent).
 */
export async function markImportedParents(
  store: Store,
  trx: Knex.Transaction,
  queue: string,
  jobs: ReadonlyArray<{ id: string; state: string; dependsOn: readonly string[] }>,
): Promise<void> {
  if (jobs.length === 0) return;
  const parents = new Set(jobs.flatMap((job) => (job.state === "blocked" ? job.dependsOn : [])));
  if ((await blockedRows(store, trx).select("id").limit(1)).length > 0) {
    const imported = jobs.map((job) => job.id);
    for (const waiting of await blockedOn(store, trx, queue, imported)) for (const parent of dependsOnOf(waiting)) parents.add(parent);
  }
  if (parents.size === 0) return;
  const rows = await findRows(store, trx, queue, [...parents]);
  if (rows.size > 0)
    await trx(store.table)
      .whereIn(
        "id",
        [...rows.values()].map((row) => row.id),
      )
      .update({ [SY.hasDependents]: true });
}
