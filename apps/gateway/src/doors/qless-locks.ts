import { type Backend, InvalidStateError, type Job, LeaseLostError, NotFoundError } from "@switchyard/core";
import { callerClock } from "../caller-clock.js";
import { qlessLog } from "./qless-channels.js";
import { countFailed, logHistory } from "./qless-effects.js";
import { exhaustedGroup, exhaustedMessage } from "./qless-jobs.js";
import { addDueInstances } from "./qless-recurring.js";
import type { QlessSettings } from "./qless-settings.js";

/**
 * qless's locks on a store that is not qless-redis, as qless's `pop` handles them (queue.lua): at most
 * `<queue>-max-concurrency` jobs running, each lock `now + heartbeat` (negative: run out already), and
 * a lock that ran out by the pop's `now` first told to its worker (lock_lost) and given `grace-period`
 * seconds more, then handed out again, or failed for good when it has no retry left. The store keeps
 * the leases; the gateway notes which runs had their grace (qless-state.ts). A core store hands out
 * expired leases at any reserve, so a pop through another door still gets them back without grace.
 */

/**
 * The most running jobs of a queue a pop reads to find the locks that ran out (one store read per
 * pop); beyond, the store reclaims them without grace, and a concurrency limit counts no further.
 */
const MOST_RUNNING = 1_000;

/** Pops up to `count` jobs of `queue` for `worker`, as qless's pop: concurrency, run-out locks, then the store's claim. */
export async function popJobs(backend: Backend, queue: string, worker: string, count: number, settings: QlessSettings): Promise<Job[]> {
  const limit = settings.maxConcurrency(queue);
  // A limit is only kept if no other pop of this gateway counts the queue's running jobs at the same time.
  if (limit > 0) return oneAtATime(backend, queue, () => pop(backend, queue, worker, count, settings, limit));
  return pop(backend, queue, worker, count, settings, 0);
}

async function pop(backend: Backend, queue: string, worker: string, asked: number, settings: QlessSettings, limit: number) {
  const now = callerClock.now();
  const held = (await runningJobs(backend, queue)).filter((job) => job.lease !== null && !settings.timeouts.stalled(backend, job));
  // qless counts the locks that still hold at `now` (a lock ending at `now` included).
  const running = limit > 0 ? held.filter((job) => (job.lease?.expiresAt ?? 0) >= now).length : 0;
  const count = limit > 0 ? Math.min(asked, Math.max(0, limit - running)) : asked;
  if (count === 0) return [];
  const runOut = held.filter((job) => (job.lease?.expiresAt ?? 0) <= now);
  // A paused queue hands nothing out, and qless looks at no lock of it.
  const again = runOut.length > 0 && !(await backend.isPaused(queue)) ? await invalidateLocks(backend, queue, runOut, settings, now) : 0;
  // qless adds the due recurring jobs for what the jobs it hands out again do not fill.
  await addDueInstances(backend, queue, count - again, settings, { pop: true });
  const lockMs = settings.lockMs(queue);
  let jobs = await backend.reserve(queue, { worker, count, leaseMs: Math.max(1, lockMs) });
  if (lockMs < 1) jobs = await Promise.all(jobs.map((job) => renewLock(backend, queue, job.id, worker, lockMs)));
  for (const job of jobs) settings.channels.tellTracked(backend, queue, job.id, "popped");
  return jobs;
}

/**
 * qless's `invalidate_locks`, oldest lock first: with a grace period, a run whose lock ran out for the
 * first time is told (ql:stalled when tracked, lock_lost to its worker and the log) and kept
 * `grace-period` seconds more; a run already given its grace, or any with no grace period, is given up:
 * failed for good with qless's exhaustion group when it has no retry left, else left run out for the
 * store's claim to hand out. Answers how many are left so, which the pop hands out again first.
 */
async function invalidateLocks(backend: Backend, queue: string, runOut: Job[], settings: QlessSettings, now: number): Promise<number> {
  let handedOutAgain = 0;
  const graceMs = settings.graceMs();
  // qless looks at no more run-out locks than the pop asks jobs, leaving the others stalled; a core
  // store's claim would hand those out with no grace, so every one is looked at here.
  const byExpiry = runOut.sort((a, b) => (a.lease?.expiresAt ?? 0) - (b.lease?.expiresAt ?? 0) || (a.id < b.id ? -1 : 1));
  for (const job of byExpiry) {
    const worker = job.lease?.worker ?? "";
    if (graceMs <= 0 || !settings.grace.given(backend, job)) {
      settings.channels.tellTracked(backend, queue, job.id, "stalled");
      logHistory(settings, backend, job, { what: "timed-out" });
      settings.stats.lockLost(backend, queue, now / 1000);
      settings.channels.lockLost(queue, job.id, worker);
      if (graceMs > 0) {
        const kept = await gone(renewLock(backend, queue, job.id, worker, graceMs));
        if (kept) settings.grace.mark(backend, kept);
        // qless keeps the lock's old expiry in the job's hash through its grace.
        if (kept) settings.history.stale(backend, kept, { expires: (job.lease?.expiresAt ?? 0) / 1000 });
        continue;
      }
    }
    // qless spends a retry here; with none left the job fails rather than run again.
    if (job.attempts >= job.maxAttempts) {
      const [group, message] = [exhaustedGroup(queue), exhaustedMessage(queue)];
      const failed = await gone(backend.fail(queue, job.id, { worker, error: { group, message }, retry: false }));
      if (!failed) continue;
      logHistory(settings, backend, failed, { what: "failed", group });
      // Spent past its last retry: qless's `remaining` goes below zero, as after a retry that finds none.
      settings.runs.failed(backend, queue, job.id, { exhausted: true });
      countFailed(settings, backend, queue);
      settings.channels.tellTracked(backend, queue, job.id, "failed");
      settings.channels.publish("ql:log", qlessLog.failed(job.id, worker, group, message), queue);
      continue;
    }
    handedOutAgain += 1;
    // qless's lock ending at `now` has run out; a core store reclaims only leases that ended before its now.
    if ((job.lease?.expiresAt ?? 0) >= now) await gone(renewLock(backend, queue, job.id, worker, -1));
  }
  return handedOutAgain;
}

/**
 * Gives `worker`'s job a lock ending `lockMs` after the command's time, as qless's `now + heartbeat`.
 * A core lease is at least 1 ms long from the store's now, so a lock that has run out already (a
 * negative `heartbeat`) is given from the moment before it ends.
 */
export function renewLock(backend: Backend, queue: string, jid: string, worker: string, lockMs: number): Promise<Job> {
  if (lockMs >= 1) return backend.heartbeat(queue, jid, { worker, leaseMs: lockMs });
  const end = callerClock.now() + lockMs;
  return callerClock.run(end - 1, () => backend.heartbeat(queue, jid, { worker, leaseMs: 1 }));
}

/** The job as the call left it, or null when it had moved on meanwhile (finished, taken by another worker, gone). */
async function gone(call: Promise<Job>): Promise<Job | null> {
  try {
    return await call;
  } catch (error) {
    if (error instanceof NotFoundError || error instanceof LeaseLostError || error instanceof InvalidStateError) return null;
    throw error;
  }
}

/** The active jobs of a queue, up to MOST_RUNNING, in one read. */
async function runningJobs(backend: Backend, queue: string): Promise<Job[]> {
  return (await backend.list(queue, { state: "active", limit: MOST_RUNNING })).items;
}

const popping = new WeakMap<Backend, Map<string, Promise<unknown>>>();

/** Runs the pops of one queue of a backend one after another, in the order they came. */
function oneAtATime<T>(backend: Backend, queue: string, work: () => Promise<T>): Promise<T> {
  let queues = popping.get(backend);
  if (!queues) {
    queues = new Map();
    popping.set(backend, queues);
  }
  const run = (queues.get(queue) ?? Promise.resolve()).then(work, work);
  const settled = run.then(
    () => undefined,
    () => undefined,
  );
  queues.set(queue, settled);
  void settled.then(() => {
    if (queues.get(queue) === settled) queues.delete(queue);
  });
  return run;
}
