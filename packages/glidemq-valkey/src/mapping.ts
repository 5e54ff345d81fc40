import type { Backoff, Job, JobState, Json, NormalizedEnqueueInput } from "@switchyard/core";
import { UnsupportedError } from "@switchyard/core";
import { parseStored } from "./codec.js";
import { PRIORITY_SHIFT } from "./keys.js";
import type { GlideJobOptions } from "./options.js";
import type { NewJob } from "./producer.js";

/**
 * Core priority (larger runs sooner, default 0) onto glide-mq's scale, where a worker drains
 * priorities 1 (first) to 2048 before the stream's priority-0 jobs. Monotonic (non-increasing):
 * 0 and below stay 0, 1..2048 become 2048..1, above 2048 clamps to 1. Where the native value cannot
 * give the core value back, the core value is kept in the job's own field `syPriority`.
 */
export function toGlidePriority(priority: number): number {
  if (priority <= 0) return 0;
  return 2049 - Math.min(priority, 2048);
}

export function fromGlidePriority(glide: number): number {
  return glide > 0 ? 2049 - Math.min(glide, 2048) : 0;
}

/** Hash fields that carry a core field; every other field travels in `native.glide.fields`. */
const CORE_FIELDS = new Set([
  "id",
  "name",
  "data",
  "opts",
  "timestamp",
  "priority",
  "maxAttempts",
  "state",
  "processedOn",
  "finishedOn",
  "returnvalue",
  "failedReason",
  "progress",
  "attemptsMade",
  "stalledCount",
]);
const OWN_FIELD = /^sy[A-Z]/;

/**
 * Switchyard's hash field for the native fields glide-mq has no place for (a producer's extras,
 * another system's fields on a migrated job), as JSON; glide-mq's own code never reads it.
 */
const NATIVE_EXTRAS_FIELD = "syNative";

/** The extras field of a new hash: every native field but those named in `own`. */
export function nativeExtrasFields(native: Record<string, unknown> | undefined, own: readonly string[]): Record<string, string> {
  const extras = Object.fromEntries(Object.entries(native ?? {}).filter(([key]) => !own.includes(key)));
  return Object.keys(extras).length > 0 ? { [NATIVE_EXTRAS_FIELD]: JSON.stringify(extras) } : {};
}

function nativeExtrasOf(hash: Record<string, string>): Record<string, unknown> {
  const stored = hash[NATIVE_EXTRAS_FIELD];
  return stored === undefined ? {} : (JSON.parse(stored) as Record<string, unknown>);
}

export const CORE_STATE_OF: Record<string, JobState> = {
  waiting: "waiting",
  prioritized: "waiting",
  "group-waiting": "waiting",
  delayed: "delayed",
  active: "active",
  suspended: "active",
  completed: "completed",
  failed: "failed",
  "waiting-children": "blocked",
};

export function coreState(hash: Record<string, string>): JobState {
  if (hash.state === "failed" && hash.revoked === "1") return "canceled";
  return CORE_STATE_OF[hash.state ?? ""] ?? "waiting";
}

function num(value: string | undefined): number | null {
  if (value === undefined || value === "") return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

export function parseOpts(hash: Record<string, string>): GlideJobOptions {
  try {
    const opts = JSON.parse(hash.opts ?? "{}") as unknown;
    return opts && typeof opts === "object" && !Array.isArray(opts) ? (opts as GlideJobOptions) : {};
  } catch {
    return {};
  }
}

function backoffOf(opts: GlideJobOptions): Backoff | null {
  const b = opts.backoff;
  if (!b || (b.type !== "fixed" && b.type !== "exponential") || !Number.isFinite(b.delay)) return null;
  return { type: b.type, delay: Math.max(0, Math.round(b.delay)) };
}

/**
 * Handouts, the current run included: failures (attemptsMade) plus stalls (stalledCount), plus one
 * while the job is active or once it has completed.
 */
export function attemptsOf(hash: Record<string, string>): number {
  const past = (num(hash.attemptsMade) ?? 0) + (num(hash.stalledCount) ?? 0);
  return hash.state === "active" || hash.state === "completed" ? past + 1 : past;
}

/** The core job a glide-mq job hash describes; `score` is its ZSCORE in `scheduled`, if any. */
export function toJob(queue: string, hash: Record<string, string>, score: string | null, deps: string[] = []): Job {
  const opts = parseOpts(hash);
  const state = coreState(hash);
  const native: Record<string, string> = {};
  // for...in, not Object.entries: this runs for every job read or written (a third of toJob's time).
  for (const field in hash) {
    if (!CORE_FIELDS.has(field) && !OWN_FIELD.test(field)) native[field] = hash[field] as string;
  }
  const runAt = state === "delayed" && score !== null ? Number(score) % PRIORITY_SHIFT : null;
  const lastActive = num(hash.lastActive) ?? num(hash.processedOn) ?? 0;
  const lease =
    state !== "active"
      ? null
      : // A Switchyard lease holds only while its start is the job's current activation.
        hash.syWorker && hash.syLeaseStart === hash.processedOn
        ? { worker: hash.syWorker, expiresAt: num(hash.syLeaseUntil) ?? 0 }
        : { worker: "glide-mq worker", expiresAt: lastActive + (Number(opts.lockDuration) || 30_000) };
  return {
    id: hash.id ?? "",
    queue,
    name: hash.name ?? "",
    data: parseStored(hash.data) as Json,
    state,
    priority: num(hash.syPriority) ?? fromGlidePriority(num(hash.priority) ?? 0),
    runAt,
    attempts: attemptsOf(hash),
    maxAttempts: Math.max(1, Number(opts.attempts ?? hash.maxAttempts ?? 0) || 0),
    backoff: backoffOf(opts),
    lease,
    createdAt: num(hash.timestamp) ?? 0,
    startedAt: num(hash.processedOn),
    finishedAt: state === "completed" || state === "failed" || state === "canceled" ? num(hash.finishedOn) : null,
    result: hash.returnvalue === undefined ? null : (parseStored(hash.returnvalue) as Json),
    error:
      hash.failedReason === undefined ? null : { message: hash.failedReason, ...(hash.syErrorGroup ? { group: hash.syErrorGroup } : {}) },
    progress: hash.progress === undefined ? null : (parseStored(hash.progress) as Json),
    tags: [],
    // deps:<id> members are "<prefix>:{<queue>}:<id>".
    dependsOn: deps.map((member) => member.slice(member.lastIndexOf(":") + 1)).sort(),
    uniqueKey: opts.deduplication?.id ?? null,
    native: { ...nativeExtrasOf(hash), glide: { state: hash.state ?? null, opts, fields: native } },
  };
}

/**
 * A glide-mq add for a core enqueue. `native.opts` (a glide-mq client's own options, from the
 * glide-mq door) is stored verbatim and used instead of options derived from the core fields.
 */
export function toNewJob(input: NormalizedEnqueueInput, now: number): NewJob {
  if (input.tags.length > 0) throw new UnsupportedError("glidemq-valkey: glide-mq jobs have no tags");
  const given = input.native?.opts;
  const runAt = input.runAt ?? (input.delay !== undefined ? now + input.delay : undefined);
  const delay = runAt !== undefined && runAt > now ? runAt - now : 0;
  const priority = toGlidePriority(input.priority);
  const derived: GlideJobOptions = { attempts: input.maxAttempts };
  if (input.backoff) derived.backoff = { type: input.backoff.type, delay: input.backoff.delay };
  if (priority > 0) derived.priority = priority;
  if (delay > 0) derived.delay = delay;
  if (input.id !== undefined) derived.jobId = input.id;
  if (input.uniqueKey !== undefined) derived.deduplication = { id: input.uniqueKey };
  const verbatim = given && typeof given === "object" && !Array.isArray(given) ? (given as GlideJobOptions) : undefined;
  // A glide-mq client's options are the whole of them, as glide-mq takes them: none given is attempts 0
  // (one run), not core's default.
  const opts = verbatim ?? derived;
  // `opts` is a glide-mq client's own (above); `glide` describes a glide-mq job, not a new one.
  const extraFields = nativeExtrasFields(input.native, ["opts", "glide"]);
  if (fromGlidePriority(opts.priority ?? priority) !== input.priority) extraFields.syPriority = String(input.priority);
  return {
    name: input.name,
    data: input.data,
    opts,
    extraFields,
    timestamp: now,
    dependsOn: input.dependsOn,
    ...(verbatim ? { storedOpts: JSON.stringify(verbatim) } : {}),
  };
}
