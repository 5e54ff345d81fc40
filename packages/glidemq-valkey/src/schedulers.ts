import { BackendUnavailableError, type GlideMqJobTemplate, type GlideMqSchedule, ValidationError } from "@switchyard/core";
import { checkTimezone, nextCronRun } from "./cron.js";
import type { QueueKeys } from "./keys.js";
import type { GlideJobOptions } from "./options.js";
import { GlideProducer } from "./producer.js";
import { type RedisClient, runScript } from "./scripts.js";

/*
 * glide-mq's job schedulers (the `schedulers` hash: name -> entry JSON): writing one as
 * Queue.upsertJobScheduler does, firing the due ones as a glide-mq worker's scheduler tick does, and
 * rescheduling a repeat-after-complete scheduler once its job ends. Every write goes through
 * write-schedulers.lua, which refuses while glide-mq's own tick or upsert holds its lock and when an
 * entry changed since it was read: then the caller reads again.
 */

/** An entry, its keys in the order glide-mq's JSON.stringify writes them. */
interface SchedulerEntry extends GlideMqSchedule {
  iterationCount?: number;
  template?: GlideMqJobTemplate;
  lastRun?: number;
  nextRun: number;
}

const ADD_ARGS = 16;
/** glide-mq waits for its scheduler lock in 25 ms steps, for up to 5 s. */
const LOCK_WAIT_MS = 25;
const LOCK_ATTEMPTS = 200;

const isInterval = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value) && value > 0;

function refuse(message: string): never {
  throw new ValidationError(`glidemq-valkey: ${message}`);
}

/** glide-mq's checks on a schedule, worded as glide-mq words them. */
function checkSchedule(schedule: GlideMqSchedule, template: GlideMqJobTemplate | undefined): void {
  if (schedule.tz !== undefined) checkTimezone(schedule.tz);
  if (schedule.every != null && !isInterval(schedule.every)) refuse("every must be a positive safe integer");
  if (schedule.repeatAfterComplete != null && !isInterval(schedule.repeatAfterComplete))
    refuse("repeatAfterComplete must be a positive safe integer");
  const modes = [schedule.pattern, schedule.every, schedule.repeatAfterComplete].filter(Boolean).length;
  if (modes === 0) refuse("Schedule must have pattern (cron), every (ms interval), or repeatAfterComplete (ms)");
  if (modes > 1) refuse("Schedule options pattern, every, and repeatAfterComplete are mutually exclusive");
  for (const field of ["startDate", "endDate"] as const) {
    const value = schedule[field];
    if (value != null && !Number.isFinite(value)) refuse(`${field} must be a valid Date or timestamp`);
  }
  if (schedule.startDate != null && schedule.endDate != null && schedule.startDate > schedule.endDate)
    refuse("startDate must be less than or equal to endDate");
  if (schedule.limit != null && !(Number.isInteger(schedule.limit) && schedule.limit > 0)) refuse("limit must be a positive integer");
  const opts = template?.opts as GlideJobOptions | undefined;
  if (opts?.lifo && (opts.ordering as { key?: unknown } | undefined)?.key)
    refuse("Scheduler template: lifo and ordering.key cannot be used together");
}

/** When a new (or rescheduled) scheduler first fires; null when that is after its endDate. */
function firstRun(schedule: GlideMqSchedule, now: number): number | null {
  const from = schedule.startDate != null && schedule.startDate > now ? schedule.startDate : now;
  let next: number;
  if (schedule.repeatAfterComplete) next = from;
  else if (schedule.pattern) next = nextCronRun(schedule.pattern, from - 1, schedule.tz);
  else if (schedule.startDate == null) next = now + (schedule.every ?? 0);
  else if (schedule.startDate > now) next = schedule.startDate;
  // Started already: the next step of the interval counted from startDate.
  else next = schedule.startDate + Math.ceil((now - schedule.startDate) / (schedule.every ?? 1)) * (schedule.every ?? 1);
  return schedule.endDate != null && next > schedule.endDate ? null : next;
}

/** When a scheduler that ran (or whose job ended) at `after` fires next; null when it is done. */
function followingRun(entry: SchedulerEntry, after: number): number | null {
  let next: number;
  if (isInterval(entry.repeatAfterComplete)) next = after + entry.repeatAfterComplete;
  else if (entry.pattern) next = nextCronRun(entry.pattern, after, entry.tz);
  else if (isInterval(entry.every)) {
    // Runs missed while no worker ticked are skipped, not made up.
    next =
      entry.nextRun && entry.nextRun <= after
        ? entry.nextRun + (Math.floor((after - entry.nextRun) / entry.every) + 1) * entry.every
        : entry.nextRun || after + entry.every;
  } else return null;
  return entry.endDate != null && next > entry.endDate ? null : next;
}

function parseEntry(raw: string | null | undefined): SchedulerEntry | null {
  if (raw == null) return null;
  try {
    return JSON.parse(raw) as SchedulerEntry;
  } catch {
    return null;
  }
}

/** One write of write-schedulers.lua: expect `expected` (null: absent), then store `next` ('' removes). */
interface Write {
  name: string;
  expected: string | null;
  next: string;
  addArgs?: string[];
}

async function write(redis: RedisClient, keys: QueueKeys, writes: Write[]): Promise<"ok" | "busy" | "changed"> {
  const args = writes.flatMap((w) => [
    w.name,
    w.expected === null ? "0" : "1",
    w.expected ?? "",
    w.next,
    w.addArgs ? "1" : "0",
    ...(w.addArgs ?? Array<string>(ADD_ARGS).fill("")),
  ]);
  const reply = await runScript(
    redis,
    "write-schedulers",
    [keys.schedulers, `${keys.schedulers}:lock:__tick__`, keys.id, keys.events],
    args,
  );
  return reply === "busy" || reply === "changed" ? reply : "ok";
}

/** Reads and writes until a write lands (glide-mq's lock free, nothing changed in between). */
async function untilWritten(attempt: () => Promise<"ok" | "busy" | "changed" | "done">): Promise<void> {
  for (let tries = 0; tries < LOCK_ATTEMPTS; tries++) {
    const outcome = await attempt();
    if (outcome === "ok" || outcome === "done") return;
    await new Promise((resolve) => setTimeout(resolve, LOCK_WAIT_MS));
  }
  throw new BackendUnavailableError("glidemq-valkey: Scheduler is busy; try again");
}

export async function upsertScheduler(
  redis: RedisClient,
  keys: QueueKeys,
  name: string,
  schedule: GlideMqSchedule,
  template: GlideMqJobTemplate | undefined,
): Promise<void> {
  checkSchedule(schedule, template);
  await untilWritten(async () => {
    const now = Date.now();
    let nextRun = firstRun(schedule, now);
    let iterationCount = 0;
    let lastRun: number | undefined;
    const raw = await redis.hget(keys.schedulers, name);
    const existing = parseEntry(raw);
    // The same schedule again keeps its place: its count, last and next run.
    const same =
      existing !== null &&
      existing.pattern === schedule.pattern &&
      existing.every === schedule.every &&
      existing.repeatAfterComplete === schedule.repeatAfterComplete &&
      existing.tz === schedule.tz &&
      existing.startDate === schedule.startDate &&
      existing.endDate === schedule.endDate;
    if (same && existing.nextRun) {
      iterationCount = existing.iterationCount ?? 0;
      lastRun = existing.lastRun;
      nextRun = existing.nextRun;
    }
    if (nextRun == null) refuse("Schedule has no occurrences within the configured bounds");
    const entry: SchedulerEntry = {
      pattern: schedule.pattern,
      every: schedule.every,
      repeatAfterComplete: schedule.repeatAfterComplete,
      tz: schedule.tz,
      startDate: schedule.startDate,
      endDate: schedule.endDate,
      limit: schedule.limit,
      iterationCount,
      template,
      lastRun,
      nextRun,
    };
    return write(redis, keys, [{ name, expected: raw, next: JSON.stringify(entry) }]);
  });
}

/** The add.lua arguments of the job a scheduler adds, as glide-mq's tick builds them; null to skip it this time. */
function jobArgs(redis: RedisClient, queue: string, prefix: string, name: string, entry: SchedulerEntry, now: number): string[] | null {
  const template = entry.template ?? {};
  const opts = (template.opts ?? {}) as GlideJobOptions;
  // The tick uses these options of the template and stores all of them as given.
  const used: GlideJobOptions = {};
  if (opts.priority !== undefined) used.priority = opts.priority;
  if (opts.attempts !== undefined) used.attempts = opts.attempts;
  if (opts.ttl !== undefined) used.ttl = opts.ttl;
  if (opts.lifo !== undefined) used.lifo = opts.lifo;
  try {
    return new GlideProducer(redis, queue, { prefix }).prepare({
      name: template.name ?? name,
      data: template.data === undefined ? {} : template.data,
      opts: used,
      storedOpts: template.opts ? JSON.stringify(template.opts) : "{}",
      timestamp: now,
      ...(isInterval(entry.repeatAfterComplete) ? { extraFields: { schedulerName: name } } : {}),
    });
  } catch {
    return null; // data too large or options out of range: glide-mq's tick skips such a template too
  }
}

/**
 * Fires the queue's due schedulers once, as a glide-mq worker's scheduler tick does: each adds its
 * template job and moves to its next run (or is removed when done). Answers how many fired; 0 while
 * glide-mq's own tick holds the lock (it is firing them) or an entry changed under us.
 */
export async function fireDueSchedulers(redis: RedisClient, queue: string, keys: QueueKeys, prefix: string, now: number): Promise<number> {
  const stored = await redis.hgetall(keys.schedulers);
  const writes: Write[] = [];
  for (const [name, raw] of Object.entries(stored)) {
    const entry = parseEntry(raw);
    if (!entry) continue;
    const remove = { name, expected: raw, next: "" };
    if (!entry.pattern && !isInterval(entry.every) && !isInterval(entry.repeatAfterComplete)) {
      writes.push(remove);
      continue;
    }
    if (!entry.nextRun || entry.nextRun > now) continue;
    const count = entry.iterationCount ?? 0;
    if ((entry.limit != null && count >= entry.limit) || (entry.endDate != null && entry.nextRun > entry.endDate)) {
      writes.push(remove);
      continue;
    }
    let next: number | null;
    try {
      next = isInterval(entry.repeatAfterComplete) ? 0 : followingRun(entry, now);
    } catch {
      writes.push(remove); // a pattern that no longer parses
      continue;
    }
    const addArgs = jobArgs(redis, queue, prefix, name, entry, now);
    if (!addArgs) continue;
    const fired: SchedulerEntry = { ...entry, lastRun: now, iterationCount: count + 1 };
    // repeatAfterComplete waits with nextRun 0 until its job ends (see afterScheduledJob).
    const done = (entry.limit != null && count + 1 >= entry.limit) || next === null;
    writes.push({ name, expected: raw, next: done ? "" : JSON.stringify({ ...fired, nextRun: next }), addArgs });
  }
  if (writes.length === 0) return 0;
  const outcome = await write(redis, keys, writes);
  return outcome === "ok" ? writes.filter((w) => w.addArgs).length : 0;
}

/**
 * A job a repeat-after-complete scheduler added has ended (completed, or failed for good): the
 * scheduler fires again `repeatAfterComplete` ms from now, as glide-mq's worker reschedules it.
 */
export async function afterScheduledJob(redis: RedisClient, keys: QueueKeys, name: string, now: number): Promise<void> {
  await untilWritten(async () => {
    const raw = await redis.hget(keys.schedulers, name);
    const entry = parseEntry(raw);
    // Removed meanwhile, or already rescheduled (a second report of the same end): nothing to do.
    if (!entry || !entry.repeatAfterComplete || entry.nextRun !== 0) return "done";
    const next = followingRun(entry, now);
    const done = next == null || (entry.limit != null && (entry.iterationCount ?? 0) >= entry.limit);
    return write(redis, keys, [{ name, expected: raw, next: done ? "" : JSON.stringify({ ...entry, nextRun: next }) }]);
  });
}
