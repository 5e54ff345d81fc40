import {
  type Backend,
  type EnqueueInput,
  type Job,
  type JobEditing,
  type JobState,
  type Json,
  NotFoundError,
  QlessCommandError,
  UnsupportedError,
  hasJobEditing,
  hasJobRemoval,
} from "@switchyard/core";
import { QLESS_STATE, asWorker } from "./qless-refusals.js";
import type { QlessSettings } from "./qless-settings.js";

/**
 * The qless core subset on a backend that is not qless-redis: each command becomes core operations
 * and its reply is shaped as the qless script shapes it, so a qless client cannot tell.
 */

/** qless `put` without `retries`: 5 retries, so 6 runs. */
const DEFAULT_RETRIES = 5;

type Arg = string | number;
export type QlessArgs = Arg[];

/** cjson encodes an empty Lua table as `{}`; qless clients expect that for empty lists. */
const luaList = (items: string[]): string[] | Record<string, never> => (items.length > 0 ? items : {});
const seconds = (ms: number) => Math.floor(ms / 1000);

function qlessError(command: string, message: string): QlessCommandError {
  return new QlessCommandError(command, message);
}

function required(command: string, func: string, args: QlessArgs, index: number, name: string): string {
  const value = args[index];
  if (value === undefined || value === "") throw qlessError(command, `${func}(): Arg "${name}" missing`);
  return String(value);
}

function numeric(command: string, func: string, value: Arg | undefined, name: string): number {
  const number = typeof value === "number" ? value : value === undefined || value.trim() === "" ? Number.NaN : Number(value);
  if (!Number.isFinite(number)) throw qlessError(command, `${func}(): Arg "${name}" not a number: ${value ?? "nil"}`);
  return number;
}

function jsonArg(command: string, func: string, value: Arg | undefined, name: string): Json {
  try {
    return JSON.parse(String(value ?? "")) as Json;
  } catch {
    throw qlessError(command, `${func}(): Arg "${name}" missing or not JSON: ${value ?? "nil"}`);
  }
}

function stringList(command: string, func: string, value: Arg | undefined, name: string): string[] {
  const parsed = jsonArg(command, func, value, name);
  // cjson decodes `{}` (an empty list as qless writes it) to an empty table.
  if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) && Object.keys(parsed).length === 0) return [];
  if (!Array.isArray(parsed) || !parsed.every((item) => typeof item === "string")) {
    throw qlessError(command, `${func}(): Arg "${name}" not a JSON array of strings: ${value}`);
  }
  return parsed as string[];
}

/** `put worker queue jid klass data delay [priority p] [tags JSON] [retries n] [depends JSON]` as an EnqueueInput. */
export function putInput(args: QlessArgs): EnqueueInput {
  const jid = required("put", "Put", args, 2, "jid");
  const klass = required("put", "Put", args, 3, "klass");
  const data = jsonArg("put", "Put", args[4], "data");
  const delay = numeric("put", "Put", args[5] ?? 0, "delay");
  const options = args.slice(6);
  if (options.length % 2 === 1) throw qlessError("put", "Odd number of additional args");
  const input: EnqueueInput = { id: jid, name: klass, data, maxAttempts: DEFAULT_RETRIES + 1 };
  if (delay > 0) input.delay = Math.round(delay * 1000);
  for (let i = 0; i < options.length; i += 2) {
    const [key, value] = [String(options[i]), options[i + 1]];
    // Clients send every option with its default (qless-py: priority 0, tags [], depends []); only
    // non-defaults reach the backend, so a backend without tags still takes a plain put.
    if (key === "priority") {
      const priority = numeric("put", "Put", value, "priority");
      if (priority !== 0) input.priority = priority;
    } else if (key === "retries") {
      input.maxAttempts = numeric("put", "Put", value, "retries") + 1;
    } else if (key === "tags") {
      const tags = stringList("put", "Put", value, "tags");
      if (tags.length > 0) input.tags = tags;
    } else if (key === "depends") {
      const depends = stringList("put", "Put", value, "depends");
      if (depends.length > 0) input.dependsOn = depends;
    }
  }
  return input;
}

/**
 * qless spends a retry when a run ends in a retry or a lock expiry, not when a job is popped; core
 * counts runs. So a job waiting for another run has spent one per run so far, while a running or
 * finished job has not spent its current (last) run.
 */
function remainingRetries(job: Job): number {
  const pending = job.state === "waiting" || job.state === "delayed" || job.state === "blocked";
  return Math.max(0, job.maxAttempts - job.attempts - (pending ? 1 : 0));
}

/** A core job as the qless job JSON of `get`/`pop`/`peek` (data stays a JSON string, as qless sends it). */
/** qless's failure for a job whose retries ran out in `queue`. */
const exhaustedGroup = (queue: string) => `failed-retries-${queue}`;
const exhaustedMessage = (queue: string) => `Job exhausted retries in queue "${queue}"`;

export function qlessJob(job: Job): Record<string, unknown> {
  const worker = job.lease?.worker ?? "";
  const history: Array<Record<string, unknown>> = [{ when: seconds(job.createdAt), q: job.queue, what: "put" }];
  if (job.startedAt !== null) history.push({ when: seconds(job.startedAt), what: "popped", worker });
  if (job.finishedAt !== null && job.state === "completed") history.push({ when: seconds(job.finishedAt), what: "done" });
  if (job.finishedAt !== null && job.state === "failed") {
    history.push({ when: seconds(job.finishedAt), what: "failed", group: job.error?.group ?? "" });
  }
  // A retry given no reason keeps qless's exhaustion words ready (see `retry`); until the job has
  // failed for good, qless shows no failure for it.
  const unexplainedRetry =
    job.state !== "failed" && job.error?.group === exhaustedGroup(job.queue) && job.error.message === exhaustedMessage(job.queue);
  const failure =
    job.error && !unexplainedRetry
      ? { group: job.error.group ?? "", message: job.error.message, when: seconds(job.finishedAt ?? job.createdAt), worker: "" }
      : {};
  return {
    jid: job.id,
    klass: job.name,
    // qless blanks the queue of a job that completed for good.
    queue: job.state === "completed" ? "" : job.queue,
    state: QLESS_STATE[job.state],
    worker,
    tracked: false,
    priority: job.priority,
    expires: job.lease ? job.lease.expiresAt / 1000 : 0,
    retries: job.maxAttempts - 1,
    remaining: remainingRetries(job),
    data: JSON.stringify(job.data),
    tags: luaList(job.tags),
    history,
    failure,
    spawned_from_jid: false,
    dependents: {},
    dependencies: luaList(job.dependsOn),
  };
}

/** qless deletes a canceled job, so a store that keeps it shows a qless client nothing. */
const forgotten = (job: Job) => job.state === "canceled";

const jobList = (jobs: Job[]) => (jobs.length > 0 ? jobs.map(qlessJob) : {});

/** Commands a non-qless backend can serve; the `queue` is the one the command was routed by. */
const TRANSLATED: Record<string, (backend: Backend, queue: string, args: QlessArgs, settings: QlessSettings) => Promise<unknown>> = {
  async put(backend, queue, args) {
    const input = putInput(args);
    const { job, created } = await backend.enqueue(queue, input);
    // A jid that exists is put again as new, as qless re-puts it.
    if (!created) await editable(backend, queue, "put of an existing jid").replace(queue, job.id, input);
    return job.id;
  },
  async pop(backend, queue, args, settings) {
    const worker = required("pop", "Pop", args, 1, "worker");
    // qless has no default count: a pop or peek without one is its error, not one job.
    const count = numeric("pop", "Pop", args[2], "count");
    if (count < 1) return {};
    return jobList(await backend.reserve(queue, { worker, count: Math.floor(count), leaseMs: settings.lockMs(queue) }));
  },
  async peek(backend, queue, args) {
    const count = numeric("peek", "Peek", args[1], "count");
    if (count < 1) return {};
    // qless's order, the claim order: higher priority first, then the earlier put.
    const waiting = (await everyJob(backend, queue, "waiting")).sort((a, b) => b.priority - a.priority || a.createdAt - b.createdAt);
    return jobList(waiting.slice(0, Math.floor(count)));
  },
  async complete(backend, queue, args) {
    const jid = required("complete", "Complete", args, 0, "jid");
    const worker = required("complete", "Complete", args, 1, "worker");
    if (args.length > 4) throw unsupported("complete with next/delay/depends", queue, backend);
    await asWorker(backend, queue, "Complete", jid, worker, () => backend.complete(queue, jid, { worker }));
    return "complete";
  },
  async fail(backend, queue, args) {
    const jid = required("fail", "Fail", args, 0, "jid");
    const worker = required("fail", "Fail", args, 1, "worker");
    const group = required("fail", "Fail", args, 2, "group");
    const message = required("fail", "Fail", args, 3, "message");
    await asWorker(backend, queue, "Fail", jid, worker, () =>
      backend.fail(queue, jid, { worker, error: { group, message }, retry: false }),
    );
    return jid;
  },
  async heartbeat(backend, queue, args, settings) {
    const jid = required("heartbeat", "Heartbeat", args, 0, "jid");
    const worker = required("heartbeat", "Heartbeat", args, 1, "worker");
    const job = await asWorker(backend, queue, "Heartbeat", jid, worker, () =>
      backend.heartbeat(queue, jid, { worker, leaseMs: settings.lockMs(queue) }),
    );
    // qless replies the new expiry as a Lua number, which Redis truncates to an integer.
    return job.lease ? seconds(job.lease.expiresAt) : 0;
  },
  async get(backend, queue, args) {
    const job = await backend.get(queue, required("get", "Job", args, 0, "jid"));
    return job && !forgotten(job) ? qlessJob(job) : null;
  },
  async multiget(backend, queue, args) {
    // Missing jids are left out, as qless does.
    const jobs = await Promise.all(args.map((jid) => backend.get(queue, String(jid))));
    return jobList(jobs.filter((job): job is Job => job !== null && !forgotten(job)));
  },
  async cancel(backend, queue, args) {
    const jids = args.map(String);
    for (const jid of jids) {
      // qless cancels what exists and ignores unknown jids; a failed job, which core keeps, is removed
      // where the store can remove jobs, as qless's cancel deletes it.
      const job = await backend.get(queue, jid);
      if (job?.state === "failed" && hasJobRemoval(backend)) await backend.remove(queue, [jid]);
      else if (job) await backend.cancel(queue, jid);
    }
    return jids;
  },
  async retry(backend, queue, args) {
    const jid = required("retry", "Retry", args, 0, "jid");
    const worker = required("retry", "Retry", args, 2, "worker");
    const delay = numeric("retry", "Retry", args[3] ?? 0, "delay");
    const group = args[4] === undefined ? exhaustedGroup(queue) : String(args[4]);
    const message = args[5] === undefined ? exhaustedMessage(queue) : String(args[5]);
    const retryDelay = Math.max(0, Math.round(delay * 1000));
    const job = await asWorker(backend, queue, "Retry", jid, worker, () =>
      backend.fail(queue, jid, { worker, error: { group, message }, retryDelay }),
    );
    // qless answers the retries left after this one, negative once the job has failed for good.
    return job.state === "failed" ? -1 : remainingRetries(job);
  },
  async priority(backend, queue, args) {
    const jid = required("priority", "Priority", args, 0, "jid");
    const priority = Math.trunc(numeric("priority", "Priority", args[1], "priority"));
    await existing(editable(backend, queue, "priority").setPriority(queue, jid, priority), "Priority", jid);
    // Redis truncates qless's Lua number to an integer reply.
    return priority;
  },
  async tag(backend, queue, args) {
    const [action, ...rest] = args.map(String);
    if (action === "add" || action === "remove") {
      const jid = required("tag", "Tag", rest, 0, "jid");
      const job = await existing(backend.get(queue, jid), "Tag", jid);
      const given = rest.slice(1);
      const tags =
        action === "add"
          ? [...job.tags, ...given.filter((tag) => !job.tags.includes(tag))]
          : job.tags.filter((tag) => !given.includes(tag));
      const tagged = await editable(backend, queue, `tag ${action}`).setTags(queue, jid, [...new Set(tags)]);
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
      const uses = new Map<string, number>();
      for (const job of await jobsOfBackend(backend)) for (const tag of job.tags) uses.set(tag, (uses.get(tag) ?? 0) + 1);
      // qless lists the tags of two jobs or more, most used first.
      const top = [...uses].filter(([, n]) => n >= 2).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
      return luaList(top.slice(offset, offset + count).map(([tag]) => tag));
    }
    throw qlessError("tag", 'Tag(): First argument must be "add", "remove" or "get"');
  },
  async jobs(backend, queue, args) {
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
    const now = Date.now();
    const listed: Record<string, () => Promise<Job[]>> = {
      running: async () =>
        (await everyJob(backend, queue, "active")).filter((job) => (job.lease?.expiresAt ?? Number.POSITIVE_INFINITY) > now),
      stalled: async () =>
        (await everyJob(backend, queue, "active")).filter((job) => (job.lease?.expiresAt ?? Number.POSITIVE_INFINITY) <= now),
      scheduled: () => everyJob(backend, queue, "delayed"),
      depends: () => everyJob(backend, queue, "blocked"),
      // Recurring jobs are qless's own; no other store has them.
      recurring: async () => [],
    };
    if (!Object.hasOwn(listed, type)) throw qlessError("jobs", `Jobs(): Unknown type "${type}"`);
    return (await listed[type]!()).slice(offset, offset + count).map((job) => job.id);
  },
  async depends(backend, queue) {
    throw new UnsupportedError(
      `qless depends on/off needs a backend whose dependencies can change after enqueue; queue ${queue} is on ${backend.kind}, which fixes them at enqueue`,
    );
  },
  async length(backend, queue) {
    const counts = await backend.counts(queue);
    return counts.active + counts.waiting + counts.delayed;
  },
  async queues(backend, queue, args) {
    if (args.length > 0) return queueCounts(backend, queue);
    // Without a queue: every queue of this backend, by name, as qless lists every queue it knows.
    const names = (await backend.queues()).sort();
    return names.length > 0 ? Promise.all(names.map((name) => queueCounts(backend, name))) : {};
  },
};

async function queueCounts(backend: Backend, queue: string) {
  const counts = await backend.counts(queue);
  const active = await everyJob(backend, queue, "active");
  const stalled = active.filter((job) => job.lease !== null && job.lease.expiresAt <= Date.now()).length;
  return {
    name: queue,
    paused: await backend.isPaused(queue),
    waiting: counts.waiting,
    running: counts.active - stalled,
    scheduled: counts.delayed,
    depends: counts.blocked,
    stalled,
    recurring: 0,
  };
}

/** The most jobs a translated listing (peek, jobs, tag get/top) reads; qless keeps these in sorted sets, a core store must scan. */
const SCAN_LIMIT = 10_000;

/** Every job of a queue in one state, page by page, up to SCAN_LIMIT. */
async function everyJob(backend: Backend, queue: string, state: JobState): Promise<Job[]> {
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

/** Every job the backend holds, in every queue and state, oldest first (for the tag listings). */
async function jobsOfBackend(backend: Backend): Promise<Job[]> {
  const jobs: Job[] = [];
  for (const queue of await backend.queues()) {
    for (const state of Object.keys(QLESS_STATE) as JobState[]) jobs.push(...(await everyJob(backend, queue, state)));
  }
  return jobs.sort((a, b) => a.createdAt - b.createdAt);
}

/** qless's `offset` and `count` arguments (default 0 and 25). */
function page(command: string, func: string, offset: Arg | undefined, count: Arg | undefined): [number, number] {
  return [Math.max(0, numeric(command, func, offset ?? 0, "offset")), Math.max(0, numeric(command, func, count ?? 25, "count"))];
}

/** The backend's JobEditing, or a 501 naming what the store cannot do. */
function editable(backend: Backend, queue: string, what: string): JobEditing {
  if (hasJobEditing(backend) && backend.capabilities.editing) return backend;
  throw new UnsupportedError(
    `qless ${what} needs a backend that can change a job after enqueue; queue ${queue} is on ${backend.kind}, which cannot`,
  );
}

/** A job the command names must exist: qless's `<Func>(): Job <jid> does not exist`. */
async function existing<T>(pending: Promise<T | null>, func: string, jid: string): Promise<T> {
  try {
    const found = await pending;
    if (found !== null) return found;
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
  }
  throw qlessError(func.toLowerCase(), `${func}(): Job ${jid} does not exist`);
}

export const TRANSLATED_COMMANDS = Object.keys(TRANSLATED);

function unsupported(what: string, queue: string, backend: Backend): UnsupportedError {
  const where = queue === "" ? `the gateway's only store is ${backend.kind}` : `queue ${queue} is on ${backend.kind}`;
  return new UnsupportedError(`qless command ${what} needs a qless-redis backend; ${where}`);
}

/** Runs a qless command on a core backend, or answers UnsupportedError (501) naming the reason. */
export async function runTranslated(
  backend: Backend,
  queue: string,
  command: string,
  args: QlessArgs,
  settings: QlessSettings,
): Promise<unknown> {
  const handler = Object.hasOwn(TRANSLATED, command) ? TRANSLATED[command] : undefined;
  if (!handler) throw unsupported(command, queue, backend);
  return handler(backend, queue, args, settings);
}
