import {
  type Backend,
  type Job,
  type Json,
  UnsupportedError,
  hasDependencyEditing,
  hasJobDataEditing,
  hasJobRemoval,
} from "@switchyard/core";
import { callerClock } from "../caller-clock.js";
import {
  type QlessArgs,
  checkJobArgs,
  cjsonArg,
  completeOptions,
  luaList,
  luaNumber,
  numeric,
  page,
  putInput,
  qlessError,
  required,
  seconds,
  workerData,
} from "./qless-args.js";
import { qlessLog } from "./qless-channels.js";
import { countFailed, expireCompleted, logHistory, tellCanceled, tellPut } from "./qless-effects.js";
import type { QlessHistoryEntry } from "./qless-history.js";
import {
  type Handler,
  type TranslatedNotes,
  byJid,
  dependenciesIn,
  editable,
  elsewhere,
  everyJob,
  exhaustedGroup,
  exhaustedMessage,
  existing,
  forgotten,
  jobList,
  jobViews,
  jobsOfBackend,
  moveJob,
  prepareAdvance,
  refuseLoneParents,
  refuseTimedOut,
  remainingRetries,
  stateIn,
  unsupported,
  viewOf,
} from "./qless-jobs.js";
import { popJobs, renewLock } from "./qless-locks.js";
import { RECURRING_COMMANDS, addDueInstances, recurringJobsOf } from "./qless-recurring.js";
import { asWorker } from "./qless-refusals.js";
import type { QlessSettings } from "./qless-settings.js";
import { memberOrder } from "./qless-state.js";
import { STORE_COMMANDS } from "./qless-store-commands.js";

export type { QlessArgs } from "./qless-args.js";
/**
 * The qless core subset on a backend that is not qless-redis: each command becomes core operations
 * and its reply is shaped as the qless script shapes it, so a qless client cannot tell. The job
 * commands are here, the store-wide ones in qless-store-commands.ts.
 */

/** Commands a non-qless backend can serve; the `queue` is the one the command was routed by. */
const JOB_COMMANDS: Record<string, Handler> = {
  async put(backend, queue, args, settings, notes) {
    // Every argument is checked before the store is read or written.
    const fresh = putInput(args);
    if (fresh.dependsOn) await dependenciesIn(backend, queue, fresh.dependsOn, "put with depends");
    const jid = String(fresh.id);
    const worker = String(args[0] ?? "");
    const dataText = typeof args[4] === "string" ? args[4] : undefined;
    // qless's jids are global: a jid another queue of the store holds is that job, moved here (one
    // held here as well is a move a failure left half done, which this put finishes). The store's
    // JobLookup names the queues holding it, on each put.
    const there = await elsewhere(backend, queue, jid);
    settings.promotions.scheduled(backend, queue, jid, fresh.delay ? callerClock.now() + fresh.delay : null);
    if (there) {
      notes.mayMoveFrom?.(there.queue);
      await moveJob(backend, there, queue, putInput(args, there), await backend.get(queue, jid));
      notes.moved?.(jid, queue);
      tellPut(settings, backend, queue, jid, worker, there, dataText);
      return jid;
    }
    const { job, created } = await backend.enqueue(queue, fresh);
    // A jid that exists is put again as new, as qless re-puts it, keeping what qless keeps of it.
    const before = created || forgotten(job) ? null : job;
    if (!created) await editable(backend, queue, "put of an existing jid").replace(queue, jid, putInput(args, before));
    tellPut(settings, backend, queue, jid, worker, before, dataText);
    return jid;
  },
  async pop(backend, queue, args, settings) {
    const worker = required("pop", "Pop", args, 1, "worker");
    // qless has no default count: a pop or peek without one is its error, not one job.
    const count = numeric("pop", "Pop", args[2], "count", true);
    const now = callerClock.now();
    const jobs = count < 1 ? [] : await popJobs(backend, queue, worker, Math.floor(count), settings);
    for (const job of jobs) {
      settings.runs.popped(backend, job);
      settings.stats.popped(backend, job, now / 1000);
      logHistory(settings, backend, job, { what: "popped", worker });
    }
    // Unless the queue is paused (a pop that got a job was not), qless notes the worker as seen
    // (`workers`) and makes the queue's due scheduled jobs waiting.
    if (jobs.length > 0 || !(await backend.isPaused(queue))) {
      settings.workers.seen(backend, worker, now);
      settings.promotions.checked(backend, queue, now);
    }
    return jobList(settings, backend, jobs);
  },
  async peek(backend, queue, args, settings) {
    const count = numeric("peek", "Peek", args[1], "count", true);
    if (count < 1) return {};
    await addDueInstances(backend, queue, Math.floor(count), settings, { pop: false });
    settings.promotions.checked(backend, queue, callerClock.now());
    // qless's order, the claim order: higher priority first, then the earlier put.
    const waiting = (await everyJob(backend, queue, "waiting")).sort((a, b) => b.priority - a.priority || a.createdAt - b.createdAt);
    return jobList(settings, backend, waiting.slice(0, Math.floor(count)));
  },
  async complete(backend, queue, args, settings, notes) {
    const jid = required("complete", "Complete", args, 0, "jid");
    const worker = required("complete", "Complete", args, 1, "worker");
    required("complete", "Complete", args, 2, "queue");
    const { data, advance } = completeOptions(args);
    const moveOn = advance && (await prepareAdvance(backend, queue, jid, advance, data));
    await refuseTimedOut(backend, queue, jid, "Complete", settings);
    const completed = await asWorker(
      backend,
      queue,
      "Complete",
      jid,
      worker,
      () => backend.complete(queue, jid, { worker }),
      stateIn(settings, backend),
    );
    const job = moveOn ? completed : await withWorkerData(backend, completed, data);
    settings.channels.tellTracked(backend, queue, jid, "completed");
    settings.runs.completed(backend, queue, jid);
    settings.stats.completed(backend, job, callerClock.now() / 1000);
    logHistory(settings, backend, job, { what: "done" });
    if (moveOn) {
      settings.channels.publish("ql:log", qlessLog.advanced(jid, queue, moveOn.next), queue);
      settings.queues.put(backend, moveOn.next);
      settings.history.put(backend, moveOn.next, jid, callerClock.now(), settings.maxJobHistory(), job);
      await moveOn.finish(job);
      // qless answers `scheduled` but leaves the job's state `waiting` when it moves on with a delay.
      const moved = moveOn.state === "scheduled" ? await backend.get(moveOn.next, jid) : null;
      if (moved) settings.history.stale(backend, moved, { state: "waiting" });
      if (moveOn.next !== queue) {
        settings.tracked.moved(backend, queue, moveOn.next, jid);
        notes.moved?.(jid, moveOn.next);
      }
      return moveOn.state;
    }
    settings.channels.publish("ql:log", qlessLog.completed(jid, queue), queue);
    await expireCompleted(backend, settings, job);
    return "complete";
  },
  async fail(backend, queue, args, settings) {
    const jid = required("fail", "Fail", args, 0, "jid");
    const worker = required("fail", "Fail", args, 1, "worker");
    const group = required("fail", "Fail", args, 2, "group");
    const message = required("fail", "Fail", args, 3, "message");
    const data = workerData("fail", "Fail", args[4]);
    await refuseTimedOut(backend, queue, jid, "Fail", settings);
    const failedAs = await asWorker(
      backend,
      queue,
      "Fail",
      jid,
      worker,
      () => backend.fail(queue, jid, { worker, error: { group, message }, retry: false }),
      stateIn(settings, backend),
    );
    const failed = await withWorkerData(backend, failedAs, data);
    logHistory(settings, backend, failed, { what: "failed", worker, group });
    countFailed(settings, backend, queue);
    settings.runs.failed(backend, queue, jid, { failure: { group, message, when: seconds(callerClock.now()), worker }, failedBy: worker });
    settings.channels.publish("ql:log", qlessLog.failed(jid, worker, group, message), queue);
    settings.channels.tellTracked(backend, queue, jid, "failed");
    return jid;
  },
  async heartbeat(backend, queue, args, settings) {
    const jid = required("heartbeat", "Heartbeat", args, 0, "jid");
    // qless's own message has the typo: "Heatbeat(): Arg "worker" missing".
    const worker = required("heartbeat", "Heatbeat", args, 1, "worker");
    const data = workerData("heartbeat", "Heartbeat", args[2]);
    await refuseTimedOut(backend, queue, jid, "Heartbeat", settings);
    const job = await asWorker(
      backend,
      queue,
      "Heartbeat",
      jid,
      worker,
      () => renewLock(backend, queue, jid, worker, settings.lockMs(queue)),
      stateIn(settings, backend),
    );
    await withWorkerData(backend, job, data);
    settings.workers.seen(backend, worker, callerClock.now());
    // qless replies the new expiry as a Lua number, which Redis truncates to an integer.
    return job.lease ? seconds(job.lease.expiresAt) : 0;
  },
  async log(backend, queue, args, settings) {
    const [jid, message, dataText] = args.map(String);
    // Lua's assert lets an empty text through: only a missing argument is refused.
    if (jid === undefined) throw qlessError("log", "Log(): Argument 'jid' missing");
    if (message === undefined) throw qlessError("log", "Log(): Argument 'message' missing");
    const data = dataText === undefined ? {} : logData(dataText);
    const job = await backend.get(queue, jid);
    if (!job || forgotten(job)) throw qlessError("log", `Log(): Job ${jid} does not exist`);
    const shown = viewOf(settings, backend)(job).history as QlessHistoryEntry[];
    settings.history.log(backend, job, callerClock.now(), settings.maxJobHistory(), shown, { ...data, what: message });
    return null;
  },
  async stats(backend, queue, args, settings) {
    const date = args[1];
    const day = luaNumber("stats", date ?? "", () => `Stats(): Arg "date" missing or not a number: ${date ?? "nil"}`);
    return settings.stats.of(backend, queue, day);
  },
  async get(backend, queue, args, settings) {
    const job = await backend.get(queue, required("get", "Job", args, 0, "jid"));
    return job && !forgotten(job) ? (await jobViews(settings, backend, [job]))[0] : null;
  },
  async multiget(backend, queue, args, settings) {
    // Missing jids are left out, as qless does.
    const jobs = await Promise.all(args.map((jid) => backend.get(queue, String(jid))));
    return jobList(
      settings,
      backend,
      jobs.filter((job): job is Job => job !== null && !forgotten(job)),
    );
  },
  async cancel(backend, queue, args, settings) {
    const jids = args.map(String);
    await refuseLoneParents(backend, queue, jids);
    for (const jid of jids) {
      // qless cancels what exists and ignores unknown jids and completed jobs; a failed job, which
      // core keeps, is removed where the store can remove jobs, as qless's cancel deletes it.
      const job = await backend.get(queue, jid);
      if (job?.state === "completed") continue;
      if (job?.state === "failed" && hasJobRemoval(backend)) await backend.remove(queue, [jid]);
      else if (job) await backend.cancel(queue, jid);
      if (job && !forgotten(job)) tellCanceled(settings, backend, job);
    }
    return jids;
  },
  async retry(backend, queue, args, settings) {
    const jid = required("retry", "Retry", args, 0, "jid");
    required("retry", "Retry", args, 1, "queue");
    const worker = required("retry", "Retry", args, 2, "worker");
    const delay = numeric("retry", "Retry", args[3] ?? 0, "delay");
    await refuseTimedOut(backend, queue, jid, "Retry", settings);
    const group = args[4] === undefined ? exhaustedGroup(queue) : String(args[4]);
    const message = args[5] === undefined ? exhaustedMessage(queue) : String(args[5]);
    const retryDelay = Math.max(0, Math.round(delay * 1000));
    // qless leaves the job's worker and lock expiry in its hash after a retry: read them before it.
    const held = (await backend.get(queue, jid))?.lease;
    const job = await asWorker(
      backend,
      queue,
      "Retry",
      jid,
      worker,
      () => backend.fail(queue, jid, { worker, error: { group, message }, retryDelay }),
      stateIn(settings, backend),
    );
    const due = job.state === "delayed" ? job.runAt : null;
    settings.promotions.scheduled(backend, queue, jid, due);
    // Given a reason, qless records it as the job's failure, whether it retries or fails for good;
    // without one, only running out of retries writes a failure (the store's, in qless's words).
    const exhausted = job.state === "failed";
    if (exhausted) {
      logHistory(settings, backend, job, { what: "failed", group });
      countFailed(settings, backend, queue);
    } else {
      settings.history.saw(backend, job);
      if (held) settings.history.stale(backend, job, { worker: held.worker, expires: held.expiresAt / 1000 });
    }
    if (args[4] !== undefined && args[5] !== undefined) {
      settings.runs.failed(backend, queue, jid, { failure: { group, message, when: seconds(callerClock.now()), worker }, exhausted });
    } else if (exhausted) settings.runs.failed(backend, queue, jid, { exhausted });
    // qless tells only a tracked job's failure here (ql:failed), and nothing on ql:log.
    if (job.state === "failed") settings.channels.tellTracked(backend, queue, jid, "failed");
    // qless answers the retries left after this one, negative once the job has failed for good.
    return job.state === "failed" ? -1 : remainingRetries(job);
  },
  async priority(backend, queue, args) {
    const jid = required("priority", "Priority", args, 0, "jid");
    const priority = Math.trunc(numeric("priority", "Priority", args[1], "priority", true));
    await existing(editable(backend, queue, "priority").setPriority(queue, jid, priority), "Priority", jid);
    // Redis truncates qless's Lua number to an integer reply.
    return priority;
  },
  async tag(backend, queue, args, settings) {
    const [action, ...rest] = args.map(String);
    if (action === "add" || action === "remove") {
      const jid = required("tag", "Tag", rest, 0, "jid");
      const job = await existing(backend.get(queue, jid), "Tag", jid);
      const tags = settings.tagDrift.tagged(backend, action, [...new Set(job.tags)], rest.slice(1));
      const tagged = await editable(backend, queue, `tag ${action}`).setTags(queue, jid, tags);
      return luaList(tagged.tags);
    }
    if (action === "get") {
      const tag = required("tag", "Tag", rest, 0, "tag");
      const [offset, count] = page("tag", "Tag", rest[1], rest[2]);
      const jids = (await jobsOfBackend(backend)).filter((job) => job.tags.includes(tag)).map((job) => job.id);
      return { total: jids.length, jobs: luaList(jids.slice(offset, offset + count)) };
    }
    if (action === "top") {
      const [offset, count] = page("tag", "Tag", rest[0], rest[1]);
      const uses = new Map<string, number>(settings.tagDrift.of(backend));
      for (const job of await jobsOfBackend(backend)) for (const tag of job.tags) uses.set(tag, (uses.get(tag) ?? 0) + 1);
      // qless lists the tags counted twice or more, most first (ZREVRANGEBYSCORE: ties in reverse order).
      const top = [...uses].filter(([, n]) => n >= 2).sort((a, b) => b[1] - a[1] || memberOrder(b[0], a[0]));
      return luaList(top.slice(offset, offset + count).map(([tag]) => tag));
    }
    if (action === undefined) throw qlessError("tag", 'Tag(): Arg "command" must be "add", "remove", "get" or "top"');
    throw qlessError("tag", 'Tag(): First argument must be "add", "remove" or "get"');
  },
  async jobs(backend, queue, args, settings) {
    const type = required("jobs", "Jobs", args, 0, "state");
    if (type === "complete") {
      const [offset, count] = page("jobs", "Jobs", args[1], args[2]);
      // qless lists completed jobs of every queue; with no queue given, so does this (all of the store's).
      const queues = queue === "" ? await backend.queues() : [queue];
      const completed = (await Promise.all(queues.map((name) => everyJob(backend, name, "completed")))).flat();
      const done = completed.sort((a, b) => (b.finishedAt ?? 0) - (a.finishedAt ?? 0));
      return done.slice(offset, offset + count).map((job) => job.id);
    }
    if (queue === "") required("jobs", "Jobs", args, 1, "queue");
    const [offset, count] = page("jobs", "Jobs", args[2], args[3]);
    // The qless caller's time when the door runs the command on it, as the backend's is.
    const now = callerClock.now();
    const listed: Record<string, () => Promise<Job[]>> = {
      running: async () =>
        (await everyJob(backend, queue, "active")).filter((job) => (job.lease?.expiresAt ?? Number.POSITIVE_INFINITY) > now),
      // A job `timeout` took is qless's work again, neither running nor stalled.
      stalled: async () =>
        (await everyJob(backend, queue, "active")).filter(
          (job) => (job.lease?.expiresAt ?? Number.POSITIVE_INFINITY) <= now && !settings.timeouts.stalled(backend, job),
        ),
      scheduled: async () => {
        settings.promotions.checked(backend, queue, now);
        // qless's scheduled set, by due time, then by jid.
        const delayed = await everyJob(backend, queue, "delayed");
        return delayed.sort((a, b) => (a.runAt ?? 0) - (b.runAt ?? 0) || byJid(a, b));
      },
      depends: () => everyJob(backend, queue, "blocked"),
    };
    if (type === "recurring") return (await recurringJobsOf(backend, queue)).slice(offset, offset + count).map((recurring) => recurring.id);
    if (!Object.hasOwn(listed, type)) throw qlessError("jobs", `Jobs(): Unknown type "${type}"`);
    return (await listed[type]!()).slice(offset, offset + count).map((job) => job.id);
  },
  async depends(backend, queue, args, settings) {
    // qless changes only a job waiting on others (job.lua): any other job, or none (Lua's HGET of a
    // missing hash is `false`), is refused in its words; such a job's parents change where the store
    // can change them (DependencyEditing), and only there.
    const jid = String(args[0] ?? "");
    required("depends", "Depends", args, 1, "command");
    const job = jid === "" ? null : await backend.get(queue, jid);
    const state = job && !forgotten(job) ? stateIn(settings, backend)(job) : "false";
    if (state !== "depends") throw qlessError("depends", `Depends(): Job ${jid} not in the depends state: ${state}`);
    const [command, ...jids] = args.slice(1).map(String);
    if (command !== "on" && command !== "off") throw qlessError("depends", 'Depends(): Argument "command" must be "on" or "off"');
    if (!hasDependencyEditing(backend)) {
      throw new UnsupportedError(
        `qless depends on/off needs a backend whose dependencies can change after enqueue; queue ${queue} is on ${backend.kind}, which fixes them at enqueue`,
      );
    }
    if (command === "on") await backend.addDependencies(queue, jid, await dependenciesIn(backend, queue, jids, "depends on"));
    else {
      const after = await backend.removeDependencies(queue, jid, jids[0] === "all" ? "all" : jids);
      // Released, it is waiting at once, whatever delay its put had (job.lua adds it to the work queue).
      if (after.state !== "blocked") settings.promotions.scheduled(backend, queue, jid, null);
    }
    return 1;
  },
  async length(backend, queue) {
    const counts = await backend.counts(queue);
    return counts.active + counts.waiting + counts.delayed;
  },
  async queues(backend, queue, args, settings) {
    if (args.length > 0) return queueCounts(backend, queue, settings);
    // Without a queue: every queue of this backend, by name, as qless lists every queue it knows.
    const names = settings.queues.known(backend, await backend.queues());
    return names.length > 0 ? Promise.all(names.map((name) => queueCounts(backend, name, settings))) : {};
  },
};

/**
 * The job with the data its worker sent written onto it, as qless's complete, heartbeat and fail write
 * it, where the store can change a job's data in place (JobDataEditing); elsewhere it is not kept.
 */
async function withWorkerData(backend: Backend, job: Job, data: Json | undefined): Promise<Job> {
  return data !== undefined && hasJobDataEditing(backend) ? backend.setData(job.queue, job.id, data) : job;
}

/** `log`'s data: a JSON object whose fields join the history entry (qless's entry is that table). */
function logData(text: string): Record<string, unknown> {
  const data = cjsonArg("log", text, "Log(): Argument 'data'", `Log(): Argument 'data' not cjson: ${text}`);
  if (data === null || typeof data !== "object" || Array.isArray(data))
    throw qlessError("log", `Log(): Argument 'data' not a JSON object: ${text}`);
  return data as Record<string, unknown>;
}

async function queueCounts(backend: Backend, queue: string, settings: QlessSettings) {
  settings.promotions.checked(backend, queue, callerClock.now());
  const counts = await backend.counts(queue);
  const active = await everyJob(backend, queue, "active");
  // A job `timeout` took counts as waiting, as qless puts it back in the queue's work.
  const timedOut = active.filter((job) => settings.timeouts.stalled(backend, job)).length;
  const stalled = active.filter((job) => job.lease !== null && job.lease.expiresAt <= callerClock.now()).length - timedOut;
  return {
    name: queue,
    paused: await backend.isPaused(queue),
    waiting: counts.waiting + timedOut,
    running: counts.active - stalled - timedOut,
    scheduled: counts.delayed,
    depends: counts.blocked,
    stalled,
    recurring: (await recurringJobsOf(backend, queue)).length,
  };
}

const TRANSLATED: Record<string, Handler> = { ...JOB_COMMANDS, ...RECURRING_COMMANDS, ...STORE_COMMANDS };

export const TRANSLATED_COMMANDS = Object.keys(TRANSLATED);

/** Runs a qless command on a core backend, or answers UnsupportedError (501) naming the reason. */
export async function runTranslated(
  backend: Backend,
  queue: string,
  command: string,
  args: QlessArgs,
  settings: QlessSettings,
  notes: TranslatedNotes = {},
): Promise<unknown> {
  const handler = Object.hasOwn(TRANSLATED, command) ? TRANSLATED[command] : undefined;
  if (!handler) {
    // qless's arguments are refused in its words even where the store lacks the command (each handler checks its own).
    checkJobArgs(command, args);
    throw unsupported(command, queue, backend);
  }
  // The command publishes its moves in qless's words (qless-channels.ts), not the event stream's.
  return settings.channels.translating(() => handler(backend, queue, args, settings, notes));
}
