import { type Backend, type Job, setNewest as setNewestWithin } from "@switchyard/core";

/**
 * What qless keeps in global Redis keys beside the jobs, kept by the gateway for stores that are not
 * qless-redis (see QlessSettings, which holds one of each): the tracked jobs (`ql:tracked`), the
 * workers seen (`ql:workers`), the jobs a `timeout` took from their worker (qless's `stalled`
 * state), the queues jobs were put in (`ql:queues`), and who ran and failed each job (and, in qless-history.ts, each job's history). One set per backend and per gateway process, in memory:
 * not shared with other gateways, not kept across a restart. A job is named by its queue and jid, since a jid is unique per queue on
 * these stores.
 */

/** The most entries one backend's registry keeps; past them the oldest go, a tenth at once (qless's keys have no bound). */
const MOST_ENTRIES = 100_000;

export const keyOf = (queue: string, jid: string) => `${queue}\u0000${jid}`;

export function perBackend<T>(maps: WeakMap<Backend, Map<string, T>>, backend: Backend): Map<string, T> {
  let map = maps.get(backend);
  if (!map) {
    map = new Map();
    maps.set(backend, map);
  }
  return map;
}

/** Adds an entry as the newest (core's setNewest), within MOST_ENTRIES unless `most` says otherwise. */
export function setNewest<T>(map: Map<string, T>, key: string, value: T, most = MOST_ENTRIES): void {
  setNewestWithin(map, key, value, most);
}

/** Takes a job's entry from its old queue's key to its new one (qless's jids are global), as the newest. */
export function moveEntry<T>(map: Map<string, T> | undefined, from: string, to: string, jid: string, moved: (value: T) => T): void {
  const value = map?.get(keyOf(from, jid));
  if (!map || value === undefined) return;
  map.delete(keyOf(from, jid));
  setNewest(map, keyOf(to, jid), moved(value));
}

export interface TrackedJob {
  queue: string;
  jid: string;
  /** When `track` was asked, epoch ms. */
  at: number;
}

/** qless's `ql:tracked`: jobs a client asked to follow (`track track <jid>`). */
export class QlessTracked {
  readonly #jobs = new WeakMap<Backend, Map<string, TrackedJob>>();

  /** true when the job was not tracked yet, as ZADD answers 1. */
  track(backend: Backend, queue: string, jid: string, at: number): boolean {
    const jobs = perBackend(this.#jobs, backend);
    if (jobs.has(keyOf(queue, jid))) return false;
    setNewest(jobs, keyOf(queue, jid), { queue, jid, at });
    return true;
  }

  /** true when the job was tracked, as ZREM answers 1. */
  untrack(backend: Backend, queue: string, jid: string): boolean {
    return perBackend(this.#jobs, backend).delete(keyOf(queue, jid));
  }

  /** qless tracks a jid, not a queue's job: a tracked job moved into another queue stays tracked. */
  moved(backend: Backend, from: string, to: string, jid: string): void {
    moveEntry(this.#jobs.get(backend), from, to, jid, (tracked) => ({ ...tracked, queue: to }));
  }

  has(backend: Backend, queue: string, jid: string): boolean {
    return this.#jobs.get(backend)?.has(keyOf(queue, jid)) ?? false;
  }

  /** Every tracked job, in ZRANGE's order: tracked earlier first, then by jid. */
  list(backend: Backend): TrackedJob[] {
    return [...(this.#jobs.get(backend)?.values() ?? [])].sort((a, b) => a.at - b.at || memberOrder(a.jid, b.jid));
  }
}

/** Redis's order of sorted-set members with equal scores: by their bytes. */
export const memberOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** qless's `ql:workers`: each worker that popped (from a queue that was not paused) or heartbeat, with when it was last seen. */
export class QlessWorkers {
  readonly #seen = new WeakMap<Backend, Map<string, number>>();

  seen(backend: Backend, worker: string, at: number): void {
    setNewest(perBackend(this.#seen, backend), worker, at);
  }

  deregister(backend: Backend, workers: string[]): void {
    const seen = this.#seen.get(backend);
    for (const worker of workers) seen?.delete(worker);
  }

  /**
   * The workers seen after `now - maxAgeMs`, most recently seen first (ties: later name first, as
   * ZREVRANGE); older ones are forgotten, as qless's `workers` prunes them.
   */
  known(backend: Backend, now: number, maxAgeMs: number): string[] {
    const seen = this.#seen.get(backend);
    if (!seen) return [];
    for (const [worker, at] of seen) if (at <= now - maxAgeMs) seen.delete(worker);
    return [...seen].sort((a, b) => b[1] - a[1] || memberOrder(b[0], a[0])).map(([worker]) => worker);
  }
}

/**
 * qless's `ql:queues`: every queue a job was put in (put, requeue, a completion's `next`), which
 * `queues` lists even once a move or a cancel left it empty. A core store lists the queues that hold
 * jobs, so the queues the qless doors put jobs in are kept here as well.
 */
export class QlessQueues {
  readonly #names = new WeakMap<Backend, Map<string, true>>();
  /** Queues `queue.forget` took off the list, until a job is put in them again. */
  readonly #forgotten = new WeakMap<Backend, Map<string, true>>();

  put(backend: Backend, queue: string): void {
    const names = perBackend(this.#names, backend);
    if (!names.has(queue)) setNewest(names, queue, true);
    this.#forgotten.get(backend)?.delete(queue);
  }

  /** qless's `queue.forget`: the queues leave the list (their jobs stay) until the next put in them. */
  forget(backend: Backend, queues: string[]): void {
    const forgotten = perBackend(this.#forgotten, backend);
    for (const queue of queues) {
      this.#names.get(backend)?.delete(queue);
      setNewest(forgotten, queue, true);
    }
  }

  /** The store's queues and the ones a job was put in here, by name, but those forgotten since. */
  known(backend: Backend, held: string[]): string[] {
    const forgotten = this.#forgotten.get(backend);
    const names = new Set([...held, ...(this.#names.get(backend)?.keys() ?? [])]);
    return [...names].filter((name) => !forgotten?.has(name)).sort();
  }
}

/**
 * qless's scheduled jobs that a store calls waiting. qless makes a queue's due scheduled jobs waiting
 * only in a pop, a peek, a `jobs scheduled` listing or a count of the queue (queue.lua's
 * check_scheduled), so until one of those runs, a job whose delay has passed is still `scheduled` there
 * and a worker's command on it is refused as on a scheduled job; a core store calls it waiting (and
 * forgets its due time) as soon as it is due. So the due time of each job a qless door put or retried
 * with a delay is kept here, and each queue's last check; a check makes every job due by then waiting
 * (qless's pop and peek make at most `count` of them waiting).
 */
export class QlessPromotions {
  readonly #due = new WeakMap<Backend, Map<string, number>>();
  readonly #checked = new WeakMap<Backend, Map<string, number>>();

  /** A qless door put or retried the job to run at `due` (ms, the caller's clock), or at once (null). */
  scheduled(backend: Backend, queue: string, jid: string, due: number | null): void {
    if (due !== null) setNewest(perBackend(this.#due, backend), keyOf(queue, jid), due);
    else this.#due.get(backend)?.delete(keyOf(queue, jid));
  }

  /** A command that runs check_scheduled ran on `queue` at `now` (ms, the caller's clock). */
  checked(backend: Backend, queue: string, now: number): void {
    const checked = perBackend(this.#checked, backend);
    setNewest(checked, queue, Math.max(now, checked.get(queue) ?? Number.NEGATIVE_INFINITY));
  }

  /** Whether qless would still call this job `scheduled`: its store calls it waiting, and no check of its queue came since it was due. */
  stillScheduled(backend: Backend, job: Job): boolean {
    const due = this.#due.get(backend)?.get(keyOf(job.queue, job.id));
    if (due === undefined || job.state !== "waiting") return false;
    return due > (this.#checked.get(backend)?.get(job.queue) ?? Number.NEGATIVE_INFINITY);
  }
}

/**
 * qless's `ql:tags` counts every `tag add` and `tag remove`, not the jobs holding a tag: adding a tag
 * a job already has counts it again, and removing one it lacks counts down (a put, a cancel and an
 * expired job move the count as the jobs holding the tag move). `tag top` on a core store counts the
 * jobs holding each tag and adds what those two commands counted beyond it, kept here per tag.
 */
export class QlessTagDrift {
  readonly #drift = new WeakMap<Backend, Map<string, number>>();

  /** A `tag add` or `tag remove` of `given` on a job holding `held`; answers the job's tags after it. */
  tagged(backend: Backend, action: "add" | "remove", held: readonly string[], given: readonly string[]): string[] {
    const tags = [...held];
    const drift = perBackend(this.#drift, backend);
    for (const tag of given) {
      const index = tags.indexOf(tag);
      if (action === "add" ? index < 0 : index >= 0) {
        if (action === "add") tags.push(tag);
        else tags.splice(index, 1);
      } else {
        setNewest(drift, tag, (drift.get(tag) ?? 0) + (action === "add" ? 1 : -1));
      }
    }
    return tags;
  }

  /** What `tag add` and `tag remove` counted beyond the jobs holding each tag. */
  of(backend: Backend): ReadonlyMap<string, number> {
    return this.#drift.get(backend) ?? new Map();
  }
}

/** A qless failure record, as job.lua writes the job's `failure` field. */
export interface QlessFailure {
  group: string;
  message: string;
  /** Epoch seconds, as the command's `now`. */
  when: number;
  worker: string;
}

interface JobRuns {
  /** The worker that popped the job's run number `attempts` (core keeps the worker only while the lease lasts). */
  popped?: { attempts: number; worker: string };
  failure?: QlessFailure;
  /** The worker a `fail` names in the job's `failed` history entry (a retry that runs out names none). */
  failedBy?: string;
  /** A `retry` ran the job out of retries: qless's `remaining` went below zero. */
  exhausted?: boolean;
}

/** What qless would show of a job's runs that the store does not keep (see QlessRuns). */
export type RunMarks = Omit<JobRuns, "popped"> & {
  /** The worker of the job's current run, kept after its lease is gone. */
  popper?: string;
};

type Failing = Pick<JobRuns, "failure" | "failedBy" | "exhausted">;
const NOT_FAILING: Failing = { failure: undefined, failedBy: undefined, exhausted: undefined };

/**
 * What qless keeps of a job's runs and a core store does not: the worker that popped the current run
 * (qless's history names it after the lock is gone), and the failure record `fail`, or a `retry`
 * given its reason, writes in qless's words (worker and time included), which qless keeps through a
 * put again and erases when the job completes. Only what the qless doors of this gateway did is
 * known; a job run or failed another way shows what the store holds.
 */
export class QlessRuns {
  readonly #jobs = new WeakMap<Backend, Map<string, JobRuns>>();

  popped(backend: Backend, job: Job): void {
    if (job.lease) this.#update(backend, job.queue, job.id, { popped: { attempts: job.attempts, worker: job.lease.worker } });
  }

  /** A `fail`, or a `retry` (with its reason, if given; `exhausted` when no retry was left). */
  failed(backend: Backend, queue: string, jid: string, change: Failing): void {
    this.#update(backend, queue, jid, { ...NOT_FAILING, ...change });
  }

  completed(backend: Backend, queue: string, jid: string): void {
    this.#update(backend, queue, jid, NOT_FAILING);
  }

  /** qless's jids are global: what is known of a job moved into another queue goes with it. */
  moved(backend: Backend, from: string, to: string, jid: string): void {
    moveEntry(this.#jobs.get(backend), from, to, jid, (runs) => runs);
  }

  /**
   * What is known of the job as it is now: the popper of its current run, and the failure record when
   * the store's own error is that one (or none, after a put again) and the job has not completed.
   */
  of(backend: Backend, job: Job): RunMarks {
    const runs = this.#jobs.get(backend)?.get(keyOf(job.queue, job.id));
    if (!runs) return {};
    const marks: RunMarks = {};
    if (runs.popped && runs.popped.attempts === job.attempts) marks.popper = runs.popped.worker;
    const { failure } = runs;
    const same = (known: QlessFailure) => job.error === null || (job.error.group === known.group && job.error.message === known.message);
    if (failure && same(failure) && job.state !== "completed") {
      marks.failure = failure;
      if (runs.failedBy !== undefined) marks.failedBy = runs.failedBy;
    }
    if (runs.exhausted && job.state === "failed" && job.attempts >= job.maxAttempts) marks.exhausted = true;
    return marks;
  }

  #update(backend: Backend, queue: string, jid: string, change: JobRuns): void {
    const jobs = perBackend(this.#jobs, backend);
    setNewest(jobs, keyOf(queue, jid), { ...jobs.get(keyOf(queue, jid)), ...change });
  }
}

/**
 * Jobs a `timeout` took from their worker. On a core store the lease is made to expire at once (the
 * next reserve hands the job out again, expired leases first); until then qless shows the job as
 * `stalled`, not running, and refuses its old worker. A mark holds while the job keeps the very lease
 * it was given; a new lease (the job popped again) or any other change ends it.
 *
 * qless's timeout also leaves the jid in its old worker's job set (`ql:w:<worker>:jobs`, scored by
 * the lock's expiry), where `workers` goes on counting it (a job until that expiry, stalled after);
 * only a put or cancel while the job is still stalled, or the worker's deregistration, takes it out.
 */
export class QlessTimeouts {
  readonly #marks = new WeakMap<Backend, Map<string, { worker: string; expiresAt: number; released: boolean }>>();
  /** Per backend and worker: the jobs a timeout left in its job set, by key, with the lock's expiry. */
  readonly #leftBehind = new WeakMap<Backend, Map<string, Map<string, { jid: string; expiresAt: number }>>>();

  /** `taken` is the job as its worker held it; `timedOut` as the store answered (released: the run given back, RunRelease). */
  mark(backend: Backend, taken: Job, timedOut: Job, released: boolean): void {
    if (!taken.lease || !timedOut.lease) return;
    const { worker, expiresAt } = taken.lease;
    setNewest(perBackend(this.#marks, backend), keyOf(timedOut.queue, timedOut.id), { ...timedOut.lease, released });
    const left = perBackend(this.#leftBehind, backend);
    const jobs = left.get(worker) ?? new Map<string, { jid: string; expiresAt: number }>();
    setNewest(left, worker, jobs);
    setNewest(jobs, keyOf(taken.queue, taken.id), { jid: taken.id, expiresAt }, 1_000);
  }

  /** The jobs timeouts left in `worker`'s job set, with their old locks' expiries. */
  leftWith(backend: Backend, worker: string): Array<{ jid: string; expiresAt: number }> {
    return [...(this.#leftBehind.get(backend)?.get(worker)?.values() ?? [])];
  }

  deregister(backend: Backend, workers: string[]): void {
    for (const worker of workers) this.#leftBehind.get(backend)?.delete(worker);
  }

  /** Whether qless would call this job `stalled`: timed out and not handed out since. */
  stalled(backend: Backend, job: Job): boolean {
    return this.#markOf(backend, job) !== undefined;
  }

  /** Whether this job is stalled with its run given back to the store. */
  released(backend: Backend, job: Job): boolean {
    return this.#markOf(backend, job)?.released ?? false;
  }

  #markOf(backend: Backend, job: Job) {
    const key = keyOf(job.queue, job.id);
    const marks = this.#marks.get(backend);
    const mark = marks?.get(key);
    if (!mark) return undefined;
    if (job.state === "active" && job.lease?.worker === mark.worker && job.lease.expiresAt === mark.expiresAt) return mark;
    marks?.delete(key);
    // Put again or canceled while stalled: qless takes the jid out of its old worker's set then.
    if (job.state !== "active") this.#leftBehind.get(backend)?.get(mark.worker)?.delete(key);
    return undefined;
  }

  /** Whether any job of `queue` and `jid` may carry a mark (a cheap test before reading the job). */
  marked(backend: Backend, queue: string, jid: string): boolean {
    return this.#marks.get(backend)?.has(keyOf(queue, jid)) ?? false;
  }

  clear(backend: Backend, queue: string, jid: string): void {
    this.#marks.get(backend)?.delete(keyOf(queue, jid));
  }
}

/**
 * The runs of jobs whose lock ran out and whose worker was told (lock_lost) at a pop, with
 * `grace-period` seconds more to finish (qless's `grace` field). The next time the lock runs out in
 * the same run the job is handed out again. A mark holds for the run it was given in (the job's
 * attempts then); a new run, or the job no longer running, ends it.
 */
export class QlessGrace {
  readonly #marks = new WeakMap<Backend, Map<string, number>>();

  mark(backend: Backend, job: Job): void {
    setNewest(perBackend(this.#marks, backend), keyOf(job.queue, job.id), job.attempts);
  }

  /** Whether this run of the job was given its grace already. */
  given(backend: Backend, job: Job): boolean {
    const marks = this.#marks.get(backend);
    const attempts = marks?.get(keyOf(job.queue, job.id));
    if (attempts === undefined) return false;
    if (job.state === "active" && job.attempts === attempts) return true;
    marks?.delete(keyOf(job.queue, job.id));
    return false;
  }
}

export interface CompletedJob {
  queue: string;
  jid: string;
  /** When it completed (the command's time), epoch ms. */
  at: number;
}

/**
 * qless's `ql:completed`: the jobs completed through the qless doors, oldest completion first (ties by
 * jid, as a sorted set orders them), so that each completion can expire those beyond
 * `jobs-history-count` or older than `jobs-history`. Jobs completed another way (another door, another
 * gateway, before a restart) are not in it, and so are kept.
 */
export class QlessCompleted {
  readonly #jobs = new WeakMap<Backend, CompletedList>();

  /** Notes a completion, as ZADD does (a jid completed again moves to its new time). */
  add(backend: Backend, entry: CompletedJob): void {
    let jobs = this.#jobs.get(backend);
    if (!jobs) {
      jobs = new CompletedList();
      this.#jobs.set(backend, jobs);
    }
    jobs.add(entry);
  }

  /** Takes out and answers the completions at or before `until`, then the oldest beyond the newest `keep`. */
  expire(backend: Backend, until: number, keep: number): CompletedJob[] {
    return this.#jobs.get(backend)?.expire(until, keep) ?? [];
  }
}

/**
 * One backend's completions in order, taken out from the front. Taken entries are skipped by `head`
 * rather than spliced out one by one: each completion expires about one, and splicing the front of
 * an array of 50,000 (qless's default `jobs-history-count`) moved the whole array every time.
 */
class CompletedList {
  #entries: CompletedJob[] = [];
  #head = 0;
  readonly #listed = new Set<string>();

  add(entry: CompletedJob): void {
    const entries = this.#entries;
    const key = keyOf(entry.queue, entry.jid);
    // Only a jid completed before is looked for: a completion does not scan the whole list.
    if (this.#listed.has(key)) {
      const before = entries.findLastIndex((other) => keyOf(other.queue, other.jid) === key);
      entries.splice(before, 1);
    }
    // Completions come mostly in time order: search from the end.
    let at = entries.length;
    while (at > this.#head && precedes(entry, entries[at - 1]!)) at--;
    if (at === entries.length) entries.push(entry);
    else entries.splice(at, 0, entry);
    this.#listed.add(key);
    if (entries.length - this.#head > MOST_ENTRIES) this.#take(this.#head + 1);
  }

  expire(until: number, keep: number): CompletedJob[] {
    const entries = this.#entries;
    let old = this.#head;
    while (old < entries.length && entries[old]!.at <= until) old++;
    return this.#take(Math.max(old, entries.length - Math.max(0, keep)));
  }

  /** Takes out the entries before index `end`; the array drops what it skipped once that is half of it. */
  #take(end: number): CompletedJob[] {
    if (end <= this.#head) return [];
    const taken = this.#entries.slice(this.#head, end);
    for (const entry of taken) this.#listed.delete(keyOf(entry.queue, entry.jid));
    this.#head = end;
    if (this.#head > 1_000 && this.#head * 2 > this.#entries.length) {
      this.#entries = this.#entries.slice(this.#head);
      this.#head = 0;
    }
    return taken;
  }
}

const precedes = (a: CompletedJob, b: CompletedJob) => a.at < b.at || (a.at === b.at && memberOrder(a.jid, b.jid) < 0);
