import {
  type Backend,
  type EnqueueInput,
  InvalidStateError,
  type Job,
  type JobEditing,
  type JobState,
  type Json,
  LeaseLostError,
  NotFoundError,
  UnsupportedError,
  hasDependentsLookup,
  hasJobEditing,
  hasJobRemoval,
  hasRunRelease,
  queuesToSearch,
} from "@switchyard/core";
import { callerClock } from "../caller-clock.js";
import { type Advance, type QlessArgs, luaList, putInput, qlessError, seconds } from "./qless-args.js";
import type { QlessHistoryEntry, StaleFields } from "./qless-history.js";
import { QLESS_STATE, type WorkerCommand, notRunning } from "./qless-refusals.js";
import type { QlessSettings } from "./qless-settings.js";
import type { QlessFailure, RunMarks } from "./qless-state.js";

/**
 * What the translated qless commands share: a core job as qless shows it (with what the gateway keeps
 * about it), the scans of a store that stand in for qless's sorted sets, and the moves and lease
 * changes qless makes in one script call and a core store makes in several.
 */

/**
 * qless spends a retry when a run ends in a retry or a lock expiry, not when a job is popped; core
 * counts runs. So a job waiting for another run has spent one per run so far, while a running or
 * finished job has not spent its current (last) run. A job a `timeout` released (RunRelease) counts
 * as waiting: its run was given back.
 */
export function remainingRetries(job: Job, released = false): number {
  const pending = released || job.state === "waiting" || job.state === "delayed" || job.state === "blocked";
  return Math.max(0, job.maxAttempts - job.attempts - (pending ? 1 : 0));
}

/** qless's failure for a job whose retries ran out in `queue`. */
export const exhaustedGroup = (queue: string) => `failed-retries-${queue}`;
export const exhaustedMessage = (queue: string) => `Job exhausted retries in queue "${queue}"`;

/**
 * What the gateway's own qless state (qless-state.ts) says of a job: tracked, stalled by a `timeout`,
 * still scheduled (due, its queue not checked since), who ran and failed it.
 */
export interface QlessMarks extends RunMarks {
  tracked?: boolean;
  stalled?: boolean;
  /** Stalled by a `timeout` that gave the run back to the store (RunRelease). */
  released?: boolean;
  scheduled?: boolean;
  /** Fields qless would still show from before the doors' last change (qless-history.ts). */
  stale?: StaleFields;
  /** The history qless would show, kept by the doors (qless-history.ts); else it is rebuilt from the job's timestamps. */
  history?: QlessHistoryEntry[];
  /** The data's text as the client spelled it, given its JSON.stringify text (qless-history.ts). */
  dataText?: (canonical: string) => string | undefined;
  /** qless's dependency sets as the store holds them (dependencyLinks); else none, and the job's own dependsOn. */
  links?: DependencyLinks;
}

/** The job's qless state, with the marks the gateway keeps that the store's state does not say. */
export const qlessStateOf = (job: Job, marks: Pick<QlessMarks, "stalled" | "scheduled">): string =>
  marks.stalled ? "stalled" : marks.scheduled ? "scheduled" : QLESS_STATE[job.state];

/** A core job as the qless job JSON of `get`/`pop`/`peek` (data stays a JSON string, as qless sends it). */
export function qlessJob(job: Job, marks: QlessMarks = {}): Record<string, unknown> {
  const worker = job.lease?.worker ?? "";
  const data = JSON.stringify(job.data);
  return {
    jid: job.id,
    klass: job.name,
    // qless blanks the queue of a job that completed for good.
    queue: job.state === "completed" ? "" : job.queue,
    // qless's timeout leaves a job `stalled`, lock gone and worker kept, until it is popped again.
    state: qlessStateOf(job, marks),
    worker,
    tracked: marks.tracked ?? false,
    priority: job.priority,
    expires: job.lease && !marks.stalled ? job.lease.expiresAt / 1000 : 0,
    retries: job.maxAttempts - 1,
    // A retry that finds none left takes qless's count below zero; a `fail` spends none.
    remaining: marks.exhausted ? -1 : remainingRetries(job, marks.released),
    data: marks.dataText?.(data) ?? data,
    tags: luaList(job.tags),
    history: marks.history ?? historyOf(job, marks),
    failure: failureOf(job, marks),
    spawned_from_jid: spawnedFrom(job),
    dependents: luaList(marks.links?.dependents ?? []),
    dependencies: luaList(marks.links?.dependencies ?? job.dependsOn),
    ...marks.stale,
  };
}

/** The recurring job an instance was added by (qless's `spawned_from_jid`, kept in `native.qless`), else false. */
function spawnedFrom(job: Job): string | false {
  const from = (job.native.qless as { spawned_from_jid?: unknown } | undefined)?.spawned_from_jid;
  return typeof from === "string" ? from : false;
}

/** A job's history rebuilt from its timestamps: its put, its last run, its end. */
function historyOf(job: Job, marks: QlessMarks): Array<Record<string, unknown>> {
  const history: Array<Record<string, unknown>> = [{ when: seconds(job.createdAt), q: job.queue, what: "put" }];
  if (job.startedAt !== null)
    history.push({ when: seconds(job.startedAt), what: "popped", worker: job.lease?.worker ?? marks.popper ?? "" });
  if (job.finishedAt !== null && job.state === "completed") history.push({ when: seconds(job.finishedAt), what: "done" });
  if (job.finishedAt !== null && job.state === "failed") {
    const failedBy = marks.failedBy === undefined ? {} : { worker: marks.failedBy };
    history.push({ when: seconds(job.finishedAt), what: "failed", group: job.error?.group ?? "", ...failedBy });
  }
  return history;
}

/**
 * qless's `failure` field: the record a qless door wrote (worker and time in qless's words), else the
 * store's error; none once the job completed, as qless erases it then.
 */
function failureOf(job: Job, marks: QlessMarks): QlessFailure | Record<string, never> {
  if (job.state === "completed") return {};
  if (marks.failure) return marks.failure;
  // A retry given no reason keeps qless's exhaustion words ready (see `retry`); until the job has
  // failed for good, qless shows no failure for it.
  const unexplainedRetry =
    job.state !== "failed" && job.error?.group === exhaustedGroup(job.queue) && job.error.message === exhaustedMessage(job.queue);
  if (!job.error || unexplainedRetry) return {};
  return { group: job.error.group ?? "", message: job.error.message, when: seconds(job.finishedAt ?? job.createdAt), worker: "" };
}

/** The marks of the gateway's that change a job's qless state: stalled by a `timeout`, still scheduled. */
const stateMarks = (settings: QlessSettings, backend: Backend, job: Job) => ({
  stalled: settings.timeouts.stalled(backend, job),
  released: settings.timeouts.released(backend, job),
  scheduled: settings.promotions.stillScheduled(backend, job),
});

/** A job's state as qless would name it on this backend (qlessStateOf with the gateway's marks). */
export const stateIn =
  (settings: QlessSettings, backend: Backend) =>
  (job: Job): string =>
    qlessStateOf(job, stateMarks(settings, backend, job));

/** Jobs by jid, as Redis orders the members of a sorted set whose scores tie. */
export const byJid = (a: Job, b: Job) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** qless deletes a canceled job, so a store that keeps it shows a qless client nothing. */
export const forgotten = (job: Job) => job.state === "canceled";

type JobView = (job: Job) => Record<string, unknown>;

/** A core job as qless shows it, with what the gateway keeps about it (tracked, timed out) for this backend. */
export const viewOf =
  (settings: QlessSettings, backend: Backend, links?: Map<Job, DependencyLinks>): JobView =>
  (job) =>
    qlessJob(job, {
      tracked: settings.tracked.has(backend, job.queue, job.id),
      ...stateMarks(settings, backend, job),
      history: settings.history.of(backend, job),
      stale: settings.history.staleOf(backend, job),
      dataText: (canonical) => settings.history.dataTextOf(backend, job, canonical),
      links: links?.get(job),
      ...settings.runs.of(backend, job),
    });

/** Jobs as qless shows them (viewOf), each with its dependency sets read from the store first. */
export async function jobViews(settings: QlessSettings, backend: Backend, jobs: Job[]): Promise<Array<Record<string, unknown>>> {
  return jobs.map(viewOf(settings, backend, await dependencyLinks(backend, jobs)));
}

/** jobViews() as qless answers a list: `{}` when empty, as cjson encodes an empty table. */
export const jobList = async (settings: QlessSettings, backend: Backend, jobs: Job[]) => luaList(await jobViews(settings, backend, jobs));

/** A job's two qless dependency sets: the jobs waiting for it, and those it still waits for. */
export interface DependencyLinks {
  dependents: string[];
  dependencies: string[];
}

/**
 * qless's `dependents` and `dependencies` of each job, as qless keeps them: a job's dependents are
 * the blocked jobs waiting for it until it completes (then qless deletes the set), read from a store
 * that can find them (DependentsLookup, one call per queue; none elsewhere); a blocked job's
 * dependencies are its parents not yet completed (qless removes each as it completes), and a job no
 * longer blocked has none.
 */
async function dependencyLinks(backend: Backend, jobs: Job[]): Promise<Map<Job, DependencyLinks>> {
  const links = new Map<Job, DependencyLinks>();
  for (const queue of new Set(jobs.map((job) => job.queue))) {
    const ofQueue = jobs.filter((job) => job.queue === queue);
    const unfinished = ofQueue.filter((job) => job.state !== "completed" && !forgotten(job)).map((job) => job.id);
    const dependents = unfinished.length > 0 && hasDependentsLookup(backend) ? await backend.dependentsOf(queue, unfinished) : new Map();
    for (const job of ofQueue) {
      const waitsFor = job.state === "blocked" ? await unfinishedParents(backend, queue, job.dependsOn) : [];
      links.set(job, { dependents: unfinished.includes(job.id) ? (dependents.get(job.id) ?? []) : [], dependencies: waitsFor });
    }
  }
  return links;
}

/**
 * qless's cancel refuses, before it cancels anything, a job that a job not named with it waits for:
 * the waiting job would be left blocked for good.
 */
export async function refuseLoneParents(backend: Backend, queue: string, jids: string[]): Promise<void> {
  if (!hasDependentsLookup(backend)) return;
  const jobs = await Promise.all(jids.map((jid) => backend.get(queue, jid)));
  const links = await dependencyLinks(
    backend,
    jobs.filter((job): job is Job => job !== null),
  );
  for (const job of links.keys()) {
    const lone = links.get(job)?.dependents.find((dependent) => !jids.includes(dependent));
    if (lone !== undefined)
      throw qlessError("cancel", `Cancel(): ${job.id} is a dependency of ${lone} but is not mentioned to be canceled`);
  }
}

async function unfinishedParents(backend: Backend, queue: string, parents: string[]): Promise<string[]> {
  const found = await Promise.all(parents.map((parent) => backend.get(queue, parent)));
  return parents.filter((_, i) => {
    const parent = found[i];
    return parent !== null && parent !== undefined && parent.state !== "completed" && !forgotten(parent);
  });
}

/**
 * A worker's command on a job that `timeout` took from it and nobody popped since: qless's job is
 * `stalled` then, and job.lua refuses it as not running.
 */
export async function refuseTimedOut(backend: Backend, queue: string, jid: string, command: WorkerCommand, settings: QlessSettings) {
  if (!settings.timeouts.marked(backend, queue, jid)) return;
  const job = await backend.get(queue, jid);
  if (job && settings.timeouts.stalled(backend, job)) throw notRunning(command, jid, "stalled");
}

/** What a translated command tells its door beside its reply, and asks of it. */
export interface TranslatedNotes {
  /** The job `jid` now lives in `queue` (a put, requeue or unfail moved it there from another queue). */
  moved?(jid: string, queue: string): void;
  /**
   * Throws (AuthError) when the caller may not take a job out of `queue`, a queue the command does not
   * name but moves a job from (qless's jids are global); asked before anything is written.
   */
  mayMoveFrom?(queue: string): void;
  /**
   * Throws (AuthError) when the caller may not reach `queue`, one the command does not name: that of
   * a recurring job found by its jid, the one it leaves or moves to. Asked before anything is written.
   */
  mayReach?(queue: string): void;
}

export type Handler = (
  backend: Backend,
  queue: string,
  args: QlessArgs,
  settings: QlessSettings,
  notes: TranslatedNotes,
) => Promise<unknown>;

/** The failure group qless files a failed job under. */
export const failureGroup = (job: Job) => job.error?.group ?? "";

/**
 * Every failed job of the backend, newest failure first, as qless's `ql:f:<group>` lists hold them
 * (LPUSH at each failure). Jobs that failed in the same millisecond keep the store's listing order
 * reversed, the later row first.
 */
export async function failedJobs(backend: Backend): Promise<Job[]> {
  const jobs: Job[] = [];
  for (const queue of await backend.queues()) jobs.push(...(await everyJob(backend, queue, "failed")).reverse());
  return jobs.sort((a, b) => (b.finishedAt ?? 0) - (a.finishedAt ?? 0));
}

/** Every active job of the backend, in every queue. */
export async function activeJobs(backend: Backend): Promise<Job[]> {
  const jobs: Job[] = [];
  for (const queue of await backend.queues()) jobs.push(...(await everyJob(backend, queue, "active")));
  return jobs;
}

/**
 * The job under `jid` in another queue of the backend than `queue` (qless's jids are global), or null.
 * A store with JobLookup says which queues hold the jid in one read; any other is asked queue by
 * queue, all at once.
 */
export async function elsewhere(backend: Backend, queue: string, jid: string): Promise<Job | null> {
  const others = (await queuesToSearch(backend, jid)).filter((other) => other !== queue);
  const found = await Promise.all(others.map((other) => backend.get(other, jid)));
  return found.find((job): job is Job => job !== null && !forgotten(job)) ?? null;
}

/** The most jobs a translated listing (peek, jobs, tag get/top) reads; qless keeps these in sorted sets, a core store must scan. */
const SCAN_LIMIT = 10_000;

/** Every job of a queue in one state, page by page, up to SCAN_LIMIT. */
export async function everyJob(backend: Backend, queue: string, state: JobState): Promise<Job[]> {
  const jobs: Job[] = [];
  let cursor: string | undefined;
  do {
    const page = await backend.list(queue, { state, limit: 500, ...(cursor ? { cursor } : {}) });
    jobs.push(...page.items);
    cursor = page.cursor ?? undefined;
    if (jobs.length > SCAN_LIMIT) {
      throw new UnsupportedError(
        `more than ${SCAN_LIMIT} ${state} jobs in queue ${queue} on ${backend.kind}: too many to scan for a qless listing`,
      );
    }
  } while (cursor);
  return jobs;
}

/** Every job the backend holds that qless would, in every queue and state, oldest first (for the tag listings). */
export async function jobsOfBackend(backend: Backend): Promise<Job[]> {
  const jobs: Job[] = [];
  // A canceled job is one qless deleted, and took out of its tags.
  const states = (Object.keys(QLESS_STATE) as JobState[]).filter((state) => state !== "canceled");
  for (const queue of await backend.queues()) {
    for (const state of states) jobs.push(...(await everyJob(backend, queue, state)));
  }
  // As a tag's sorted set orders them: by put time, ties by jid.
  return jobs.sort((a, b) => a.createdAt - b.createdAt || byJid(a, b));
}

/**
 * Takes a job from its worker as qless's `timeout` takes the lock: the next reserve hands the job out
 * again (lapsed leases first, as qless pops a timed-out job first). A store that can release a run
 * (RunRelease) gives it back unspent, as qless spends retries only on a lock that runs out; elsewhere
 * the lease is ended by a heartbeat of its holder giving a lease that ran out a moment before the
 * command's time, and that run is spent. A store whose clock the gateway does not set answers a
 * lease 1 ms long, which is waited out.
 */
export async function takeFromWorker(backend: Backend, job: Job): Promise<Job> {
  const worker = job.lease?.worker ?? "";
  const now = callerClock.now();
  let expired: Job;
  try {
    expired = hasRunRelease(backend)
      ? await backend.release(job.queue, job.id, { worker })
      : await callerClock.run(now - 2, () => backend.heartbeat(job.queue, job.id, { worker, leaseMs: 1 }));
  } catch (error) {
    // Finished or handed to another worker since it was read: no longer the running job qless would time out.
    if (error instanceof NotFoundError || error instanceof LeaseLostError || error instanceof InvalidStateError) {
      throw qlessError("timeout", `Timeout(): Job ${job.id} not running`);
    }
    throw error;
  }
  const wait = (expired.lease?.expiresAt ?? 0) - callerClock.now() + 1;
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(wait, 10)));
  return expired;
}

/**
 * What moving `job` into `queue` needs: editing when the queue holds the jid already, removal when the
 * job is finished. A job waiting on others is not moved without new ones (`input`'s): a core store's
 * dependencies name jobs of the job's own queue, so the old ones would mean other jobs, or none, there.
 */
export function moveable(backend: Backend, job: Job, queue: string, inTarget: Job | null, input?: EnqueueInput): void {
  if (inTarget) editable(backend, queue, "move of a jid into a queue that holds it");
  if ((job.state === "completed" || job.state === "failed") && !hasJobRemoval(backend)) {
    throw new UnsupportedError(
      `qless's move of a ${job.state} job into another queue needs a backend that can remove jobs; queue ${job.queue} is on ${backend.kind}, which cannot`,
    );
  }
  if (job.state === "blocked" && (input?.dependsOn?.length ?? 0) === 0) {
    throw new UnsupportedError(
      `qless's move of job ${job.id}, which waits on other jobs of queue ${job.queue}, into queue ${queue} would lose its dependencies: on ${backend.kind} they hold within one queue`,
    );
  }
}

/**
 * qless moves a jid between queues when it is put into another one; here the job is put in `queue`
 * under the same jid first, then taken out of its old queue (canceled, or removed once finished), so
 * a failure between the two leaves it in both rather than in neither, and the same put sent again
 * finishes the move (see `put`).
 */
export async function moveJob(backend: Backend, job: Job, queue: string, input: EnqueueInput, inTarget: Job | null): Promise<void> {
  moveable(backend, job, queue, inTarget, input);
  const { created } = await backend.enqueue(queue, { ...input, id: job.id });
  if (!created) await editable(backend, queue, "move of a jid into a queue that holds it").replace(queue, job.id, input);
  await takeOut(backend, job);
}

/**
 * Of qless's `depends` jids for a job going into `queue`, those it would wait on: the ones unfinished
 * (qless drops unknown and completed jids). A store's dependencies hold within one queue, so a jid
 * unfinished in another queue only is refused (501) rather than dropped.
 */
export async function dependenciesIn(backend: Backend, queue: string, depends: string[], what: string): Promise<string[]> {
  const kept: string[] = [];
  for (const jid of depends) {
    const found = await Promise.all((await queuesToSearch(backend, jid)).map((holder) => backend.get(holder, jid)));
    const where = found.filter((job): job is Job => job !== null && !forgotten(job) && job.state !== "completed").map((job) => job.queue);
    if (where.length === 0) continue;
    if (!where.includes(queue)) {
      throw new UnsupportedError(
        `qless's ${what} of a job in ${queue} on job ${jid} of queue ${where[0]}: on ${backend.kind} a job waits only for jobs of its own queue`,
      );
    }
    kept.push(jid);
  }
  return kept;
}

/**
 * qless's `complete ... next <queue>`: once completed, the job is put in the next queue under its jid
 * with the `data` the worker sent (priority, tags and retries kept, its runs counted afresh), as qless
 * moves it on. Asked before the completion, this refuses what the store cannot do while nothing has
 * changed; its `finish` then moves the completed job on.
 */
export async function prepareAdvance(backend: Backend, queue: string, jid: string, advance: Advance, data: Json) {
  const dependsOn = await dependenciesIn(backend, advance.next, advance.depends, "complete with next and depends");
  if (dependsOn.length > 0 && !backend.capabilities.dependencies) throw unsupported("complete with next and depends", queue, backend);
  const job = await existing(backend.get(queue, jid), "Complete", jid);
  const input = putInput(["", advance.next, jid, job.name, JSON.stringify(data), advance.delay], job);
  if (dependsOn.length > 0) input.dependsOn = dependsOn;
  const { next } = advance;
  // Into its own queue: put again there. Into another: moved as a put moves it, once completed.
  const editing = next === queue ? editable(backend, queue, "complete with next into the same queue") : null;
  const inTarget = editing ? null : await backend.get(next, jid);
  if (!editing) moveable(backend, { ...job, state: "completed" }, next, inTarget, input);
  return {
    next,
    /** The state qless answers: where the job waits in the next queue. */
    state: dependsOn.length > 0 ? "depends" : advance.delay > 0 ? "scheduled" : "waiting",
    finish: (completed: Job) => (editing ? editing.replace(queue, jid, input) : moveJob(backend, completed, next, input, inTarget)),
  };
}

const finished = (job: Job) => job.state === "completed" || job.state === "failed";

/**
 * Takes a moved job out of its old queue: canceled, or removed when finished. A job that its worker
 * finished, or someone canceled or removed, since it was read is taken out as it is now.
 */
async function takeOut(backend: Backend, job: Job): Promise<void> {
  if (finished(job) && hasJobRemoval(backend)) {
    await backend.remove(job.queue, [job.id]);
    return;
  }
  try {
    await backend.cancel(job.queue, job.id);
  } catch (error) {
    if (!(error instanceof InvalidStateError || error instanceof NotFoundError)) throw error;
    const now = await backend.get(job.queue, job.id);
    if (now && finished(now) && hasJobRemoval(backend)) await backend.remove(job.queue, [job.id]);
    else if (now !== null && !forgotten(now)) throw error;
  }
}

/** The backend's JobEditing, or a 501 naming what the store cannot do. */
export function editable(backend: Backend, queue: string, what: string): JobEditing {
  if (hasJobEditing(backend) && backend.capabilities.editing) return backend;
  throw new UnsupportedError(
    `qless ${what} needs a backend that can change a job after enqueue; queue ${queue} is on ${backend.kind}, which cannot`,
  );
}

/** A job the command names must exist: qless's `<Func>(): Job <jid> does not exist`. */
export async function existing<T>(pending: Promise<T | null>, func: string, jid: string): Promise<T> {
  try {
    const found = await pending;
    if (found !== null) return found;
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
  }
  throw qlessError(func.toLowerCase(), `${func}(): Job ${jid} does not exist`);
}

export function unsupported(what: string, queue: string, backend: Backend): UnsupportedError {
  const where = queue === "" ? `the gateway's only store is ${backend.kind}` : `queue ${queue} is on ${backend.kind}`;
  return new UnsupportedError(`qless command ${what} needs a qless-redis backend; ${where}`);
}
