import type { Job } from "@switchyard/core";
import { UnsupportedError, hasRunRelease } from "@switchyard/core";
import { callerClock } from "../caller-clock.js";
import { againAsNew } from "./native-actions.js";
import { type Arg, listRange, luaList, luaNumber, putInput, qlessError, wrongArgs } from "./qless-args.js";
import { carryOver, logHistory, tellPut } from "./qless-effects.js";
import {
  type Handler,
  activeJobs,
  editable,
  elsewhere,
  failedJobs,
  failureGroup,
  forgotten,
  jobList,
  moveJob,
  moveable,
  takeFromWorker,
} from "./qless-jobs.js";

/**
 * The qless commands over a store as a whole rather than one job of a queue: pause, failures and
 * their unfail, requeue, timeout, tracking and workers. What qless keeps in its own keys and a core
 * store has no place for (tracked jobs, workers seen, timed-out jobs) the gateway keeps
 * (qless-state.ts).
 */

export const STORE_COMMANDS: Record<string, Handler> = {
  async requeue(backend, queue, args, settings, notes) {
    // qless checks that the job exists first, then puts it as `put` does (its words for bad arguments included).
    const jid = args[2] === undefined ? undefined : String(args[2]);
    if (jid === undefined) throw qlessError("requeue", "Job(): no jid provided");
    const inTarget = await backend.get(queue, jid);
    const job = inTarget && !forgotten(inTarget) ? inTarget : await elsewhere(backend, queue, jid);
    if (!job) throw qlessError("requeue", `Requeue(): Job ${jid} does not exist`);
    const input = putInput(args, job);
    if (job.queue === queue) await editable(backend, queue, "requeue").replace(queue, jid, input);
    else {
      // qless's jids are global, so a requeue into another queue moves the job there.
      notes.mayMoveFrom?.(job.queue);
      await moveJob(backend, job, queue, input, inTarget);
    }
    notes.moved?.(jid, queue);
    // qless's requeue is a put, and tells what a put tells.
    tellPut(settings, backend, queue, jid, String(args[0] ?? ""), job, typeof args[4] === "string" ? args[4] : undefined);
    return jid;
  },
  async pause(backend, _queue, args) {
    if (args.length === 0) throw wrongArgs("pause");
    for (const name of new Set(args.map(String))) await backend.pause(name);
    return null;
  },
  async unpause(backend, _queue, args) {
    if (args.length === 0) throw wrongArgs("unpause");
    for (const name of new Set(args.map(String))) await backend.resume(name);
    return null;
  },
  async "queue.forget"(backend, _queue, args, settings) {
    // qless's ZREM of no member is Redis's own arity error, as for pause.
    if (args.length === 0) throw wrongArgs("queue.forget");
    settings.queues.forget(backend, args.map(String));
    return null;
  },
  async failed(backend, _queue, args) {
    const [group, start, limit] = args;
    const first = failedNumber(start ?? 0, "start");
    const count = failedNumber(limit ?? 25, "limit");
    const failed = await failedJobs(backend);
    if (group === undefined) {
      // Every failure group with how many jobs it holds (qless's `ql:failures`).
      const groups: Record<string, number> = {};
      for (const job of failed) groups[failureGroup(job)] = (groups[failureGroup(job)] ?? 0) + 1;
      return groups;
    }
    const jids = failed.filter((job) => failureGroup(job) === String(group)).map((job) => job.id);
    return { total: jids.length, jobs: luaList(listRange(jids, first, first + count - 1)) };
  },
  async unfail(backend, queue, args, settings, notes) {
    if (args[0] === undefined) throw qlessError("unfail", "Queue(): no queue name provided");
    const group = args[1] === undefined ? undefined : String(args[1]);
    if (group === undefined) throw qlessError("unfail", 'Unfail(): Arg "group" missing');
    const count = Math.trunc(luaNumber("unfail", args[2] ?? 25, () => `Unfail(): Arg "count" not a number: ${args[2]}`));
    // qless takes the `count` oldest failures of the group (the tail of `ql:f:<group>`), from any queue.
    const ofGroup = (await failedJobs(backend)).filter((job) => failureGroup(job) === group);
    const chosen = listRange(ofGroup, -count, -1);
    // What the store must be able to do is checked before anything is written.
    const targets = new Map<string, Job | null>();
    for (const job of chosen) {
      if (job.queue === queue) editable(backend, queue, "unfail");
      else {
        notes.mayMoveFrom?.(job.queue);
        targets.set(job.id, await backend.get(queue, job.id));
        moveable(backend, job, queue, targets.get(job.id) ?? null);
      }
    }
    for (const job of chosen) {
      const input = { id: job.id, ...againAsNew(job) };
      if (job.queue === queue) await editable(backend, queue, "unfail").replace(queue, job.id, input);
      else await moveJob(backend, job, queue, input, targets.get(job.id) ?? null);
      // As queue.lua's unfail: a put entry in the job's history, its failure record kept; nothing published.
      settings.history.put(backend, queue, job.id, callerClock.now(), settings.maxJobHistory(), job);
      carryOver(settings, backend, job, queue);
      notes.moved?.(job.id, queue);
    }
    return chosen.length;
  },
  async timeout(backend, queue, args, settings) {
    // Every jid is checked before any is timed out, so a bad one changes nothing.
    const jobs: Job[] = [];
    for (const jid of args.map(String)) {
      const job = await backend.get(queue, jid);
      if (!job || forgotten(job)) throw qlessError("timeout", `Timeout(): Job ${jid} does not exist`);
      if (job.state !== "active" || settings.timeouts.stalled(backend, job))
        throw qlessError("timeout", `Timeout(): Job ${jid} not running`);
      if (!job.lease) {
        throw new UnsupportedError(
          `qless timeout of job ${jid}: a worker holds it without a lease (a legacy claim on ${backend.kind}), which only that worker can give back`,
        );
      }
      jobs.push(job);
    }
    for (const job of jobs) {
      const expired = await takeFromWorker(backend, job);
      settings.timeouts.mark(backend, job, expired, hasRunRelease(backend));
      logHistory(settings, backend, expired, { what: "timed-out" });
      settings.channels.lockLost(job.queue, job.id, job.lease?.worker ?? "");
    }
    return null;
  },
  async track(backend, queue, args, settings) {
    const [action, jid] = args.map(String);
    if (action === undefined) {
      // Every tracked job, and the jids of those the store no longer holds.
      const jobs: Job[] = [];
      const expired: string[] = [];
      for (const tracked of settings.tracked.list(backend)) {
        const job = await backend.get(tracked.queue, tracked.jid);
        if (job && !forgotten(job)) jobs.push(job);
        else expired.push(tracked.jid);
      }
      return { jobs: await jobList(settings, backend, jobs), expired: luaList(expired) };
    }
    if (jid === undefined) throw qlessError("track", 'Track(): Arg "jid" missing');
    const inQueue = queue === "" ? null : await backend.get(queue, jid);
    const job = inQueue && !forgotten(inQueue) ? inQueue : await elsewhere(backend, queue, jid);
    if (!job) throw qlessError("track", "Track(): Job does not exist");
    const act = action.toLowerCase();
    if (act !== "track" && act !== "untrack") throw qlessError("track", `Track(): Unknown action "${action}"`);
    // qless tells `ql:track` / `ql:untrack` whether or not the job was tracked, then answers ZADD's or ZREM's count.
    settings.channels.publish(`ql:${act}`, jid, job.queue);
    if (act === "track") return settings.tracked.track(backend, job.queue, jid, callerClock.now()) ? 1 : 0;
    return settings.tracked.untrack(backend, job.queue, jid) ? 1 : 0;
  },
  async workers(backend, _queue, args, settings) {
    const now = callerClock.now();
    const known = settings.workers.known(backend, now, settings.maxWorkerAgeMs());
    // A worker's jobs are those it holds a lease on, and those a timeout left in its set (qless-state.ts),
    // each by its lock's expiry: running while it lasts, stalled once it ran out.
    const held = (await activeJobs(backend)).filter((job) => job.lease !== null && !settings.timeouts.stalled(backend, job));
    const of = (worker: string) => {
      // One entry per jid, as in qless's set: a job the worker popped again holds its new lock's expiry.
      const byJid = new Map(settings.timeouts.leftWith(backend, worker).map((entry) => [entry.jid, entry]));
      for (const job of held) if (job.lease?.worker === worker) byJid.set(job.id, { jid: job.id, expiresAt: job.lease.expiresAt });
      const entries = [...byJid.values()].sort((a, b) => b.expiresAt - a.expiresAt);
      return { jobs: entries.filter((entry) => entry.expiresAt > now), stalled: entries.filter((entry) => entry.expiresAt <= now) };
    };
    if (args[0] !== undefined) {
      const { jobs, stalled } = of(String(args[0]));
      return { jobs: luaList(jobs.map((entry) => entry.jid)), stalled: luaList(stalled.map((entry) => entry.jid)) };
    }
    return luaList(
      known.map((name) => {
        const { jobs, stalled } = of(name);
        return { name, jobs: jobs.length, stalled: stalled.length };
      }),
    );
  },
  async "worker.deregister"(backend, _queue, args, settings) {
    if (args.length === 0) throw wrongArgs("worker.deregister");
    settings.workers.deregister(backend, args.map(String));
    settings.timeouts.deregister(backend, args.map(String));
    return null;
  },
};

const failedNumber = (value: Arg, name: string) =>
  Math.trunc(luaNumber("failed", value, () => `Failed(): Arg "${name}" is not a number: ${value}`));
