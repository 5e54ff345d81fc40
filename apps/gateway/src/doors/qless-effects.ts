import { type Backend, type Job, hasJobRemoval } from "@switchyard/core";
import { callerClock } from "../caller-clock.js";
import { qlessLog } from "./qless-channels.js";
import type { QlessSettings } from "./qless-settings.js";

/**
 * What qless's script does around a job's move besides the move itself, for the translated commands:
 * the messages a put and a cancel publish (qless-channels.ts), the history and statistics it keeps
 * (qless-history.ts, qless-stats.ts), and the completed jobs a completion expires
 * (`jobs-history-count`, `jobs-history`).
 */

/**
 * A put (or requeue) of `jid` into `queue` by `worker`; `before` is the job the jid named until then,
 * in this queue or another one it was moved from. qless tells the log, then the worker that held the
 * job when another one put it (lock_lost), then `ql:put` when the job is tracked: qless tracks a jid,
 * so a moved job stays tracked (and keeps its failure record). `dataText` is the data as the put sent it.
 */
export function tellPut(
  settings: QlessSettings,
  backend: Backend,
  queue: string,
  jid: string,
  worker: string,
  before: Job | null,
  dataText?: string,
): void {
  const now = callerClock.now();
  settings.queues.put(backend, queue);
  settings.history.put(backend, queue, jid, now, settings.maxJobHistory(), before, dataText);
  settings.stats.put(backend, queue, jid, now / 1000, before, before ? failedAt(settings, backend, before) : undefined);
  settings.channels.publish("ql:log", qlessLog.put(jid, queue), queue);
  const holder = before?.state === "active" ? (before.lease?.worker ?? "") : "";
  if (before && holder !== "" && holder !== worker) settings.channels.lockLost(before.queue, jid, holder);
  carryOver(settings, backend, before, queue);
  settings.channels.tellTracked(backend, queue, jid, "put");
}

/**
 * A job put back into `queue` (a put, requeue or unfail): qless's jids are global, so a job moved from
 * another queue stays tracked and keeps its failure record.
 */
export function carryOver(settings: QlessSettings, backend: Backend, before: Job | null, queue: string): void {
  if (!before || before.queue === queue) return;
  settings.tracked.moved(backend, before.queue, queue, before.id);
  settings.runs.moved(backend, before.queue, queue, before.id);
}

/** An entry of qless's history for a move of `job` (as it stands after it) the doors made, at the caller's now. */
export function logHistory(settings: QlessSettings, backend: Backend, job: Job, entry: { what: string; [detail: string]: unknown }): void {
  settings.history.add(backend, job, callerClock.now(), settings.maxJobHistory(), entry);
}

/** A job of `queue` failed for good through the doors, as qless's statistics count it (failures and failed). */
export function countFailed(settings: QlessSettings, backend: Backend, queue: string): void {
  settings.stats.failed(backend, queue, callerClock.now() / 1000);
}

/** When a failed job failed, in seconds: the failure record a qless door wrote, else the store's finish time. */
function failedAt(settings: QlessSettings, backend: Backend, job: Job): number | undefined {
  const when = settings.runs.of(backend, job).failure?.when;
  return when ?? (job.finishedAt === null ? undefined : job.finishedAt / 1000);
}

/**
 * A cancel of `job` (as it was before): qless tells the log with the worker that held it ("" when none
 * did), that worker, and `ql:canceled` when it is tracked. A completed job is not canceled by qless,
 * and nothing is told.
 */
export function tellCanceled(settings: QlessSettings, backend: Backend, job: Job): void {
  if (job.state === "completed") return;
  settings.history.forget(backend, job.queue, job.id);
  if (job.state === "failed")
    settings.stats.canceledFailed(backend, job.queue, failedAt(settings, backend, job) ?? callerClock.now() / 1000);
  const worker = job.state === "active" ? (job.lease?.worker ?? "") : "";
  const message = qlessLog.canceled(job.id, job.queue, worker);
  settings.channels.publish("ql:log", message, job.queue);
  if (worker !== "") settings.channels.publish(`ql:w:${worker}`, message, job.queue);
  settings.channels.tellTracked(backend, job.queue, job.id, "canceled");
}

/**
 * qless's completion dance: the job joins the completed jobs (`ql:completed`), and those completed at
 * or before `now - jobs-history` seconds, then all but the newest `jobs-history-count`, are deleted
 * (out of their tags with them, since tags are read from the jobs). On a store that cannot remove jobs
 * they are kept. A job put again since it completed is no longer a completed job and is left alone.
 */
export async function expireCompleted(backend: Backend, settings: QlessSettings, job: Job): Promise<void> {
  if (!hasJobRemoval(backend)) return;
  const now = callerClock.now();
  settings.completed.add(backend, { queue: job.queue, jid: job.id, at: job.finishedAt ?? now });
  const { count, ms } = settings.jobsHistory();
  for (const old of settings.completed.expire(backend, now - ms, count)) {
    const current = await backend.get(old.queue, old.jid);
    if (current?.state === "completed" && current.finishedAt === old.at) await backend.remove(old.queue, [old.jid]);
  }
}
