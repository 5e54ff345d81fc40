import type { ImportResult, Job } from "@switchyard/core";
import { UnsupportedError, ValidationError } from "@switchyard/core";
import { encodeData, flatToRecord } from "./codec.js";
import { PRIORITY_SHIFT, type QueueKeys, validateJobId } from "./keys.js";
import { fromGlidePriority, nativeExtrasFields, toGlidePriority, toJob } from "./mapping.js";
import type { GlideJobOptions } from "./options.js";
import { type RedisClient, runScript } from "./scripts.js";

interface ImportPlan {
  id: string;
  route: "stream" | "priority" | "lifo" | "scheduled" | "completed" | "failed" | "blocked";
  score: number;
  name: string;
  /** The job hash as written (HSET of its fields). */
  fields: Record<string, string>;
  dependsOn: string[];
  /** The dedup id the job holds (its unique key), '' for none. */
  dedupId: string;
  createdAt: number;
}

/**
 * Fields a migrated job may not carry over: Switchyard's lease bookkeeping (the stream entry is made
 * anew) and what is re-derived from the job (attempts, dependencies done, cancellation).
 */
const DROPPED = new Set(["depsCompleted", "syWorker", "syLeaseUntil", "syLeaseStart", "syEntryId", "attemptsMade", "revoked"]);
/** A run's stall bookkeeping: it goes with an active job's lease, and stays the history of any other job. */
const RUN_FIELDS = new Set(["stalledCount", "lastActive"]);

function nativeGlide(job: Job): { opts?: GlideJobOptions; fields: Record<string, string> } {
  const glide = job.native.glide as { opts?: GlideJobOptions; fields?: Record<string, string> } | undefined;
  return { ...(glide?.opts ? { opts: glide.opts } : {}), fields: glide?.fields ?? {} };
}

/**
 * The hash and placement of one migrated job. Ids, timestamps, attempts, results and errors are kept;
 * an active job arrives waiting (its lease belongs to the old store) with its attempts counted, so
 * attemptsMade = attempts (one less for a completed job, whose run counts once more on read).
 */
function plan(job: Job): ImportPlan {
  validateJobId(job.id);
  if (job.tags.length > 0) {
    throw new UnsupportedError(`glidemq-valkey: job ${job.id} has tags, which glide-mq jobs cannot carry`, { id: job.id });
  }
  if (job.state === "blocked" && job.dependsOn.length === 0) {
    throw new ValidationError(`glidemq-valkey: job ${job.id} is blocked but names no dependency`);
  }
  const glide = nativeGlide(job);
  const priority = toGlidePriority(job.priority);
  const opts: GlideJobOptions = glide.opts ?? {
    attempts: job.maxAttempts,
    ...(job.backoff ? { backoff: job.backoff } : {}),
    ...(job.uniqueKey !== null ? { deduplication: { id: job.uniqueKey } } : {}),
    ...(priority > 0 ? { priority } : {}),
  };
  const state = job.state === "active" ? "waiting" : job.state;
  const fields: Record<string, string> = {};
  for (const [field, value] of Object.entries(glide.fields)) {
    if (!DROPPED.has(field) && !(job.state === "active" && RUN_FIELDS.has(field))) fields[field] = value;
  }
  Object.assign(fields, {
    id: job.id,
    name: job.name,
    data: encodeData(job.data),
    opts: JSON.stringify(opts),
    timestamp: String(job.createdAt),
    attemptsMade: String(state === "completed" ? Math.max(0, job.attempts - 1) : job.attempts),
    delay: fields.delay ?? "0",
    priority: String(priority),
    maxAttempts: String(opts.attempts ?? job.maxAttempts),
  });
  if (fromGlidePriority(priority) !== job.priority) fields.syPriority = String(job.priority);
  Object.assign(fields, nativeExtrasFields(job.native, ["glide"]));
  if (job.startedAt !== null && state !== "waiting") fields.processedOn = String(job.startedAt);
  if (job.finishedAt !== null) fields.finishedOn = String(job.finishedAt);
  if (job.result !== null || state === "completed") fields.returnvalue = JSON.stringify(job.result);
  if (job.error) fields.failedReason = job.error.message;
  if (job.error?.group) fields.syErrorGroup = job.error.group;
  if (job.progress !== null) fields.progress = JSON.stringify(job.progress);
  let route: ImportPlan["route"] = "stream";
  let score = 0;
  let nativeState: string = state;
  if (state === "delayed") {
    route = "scheduled";
    score = priority * PRIORITY_SHIFT + (job.runAt ?? job.createdAt);
  } else if (state === "waiting" && priority > 0) {
    route = "scheduled";
    score = priority * PRIORITY_SHIFT;
    nativeState = "prioritized";
  } else if (state === "waiting" && fields.lifo === "1") {
    route = "lifo";
  } else if (state === "blocked") {
    route = "blocked";
    score = job.createdAt;
    nativeState = "waiting-children";
  } else if (state === "completed") {
    route = "completed";
    score = job.finishedAt ?? job.createdAt;
  } else if (state === "failed" || state === "canceled") {
    route = "failed";
    score = job.finishedAt ?? job.createdAt;
    nativeState = "failed";
    if (state === "canceled") fields.revoked = "1";
  }
  fields.state = nativeState;
  return {
    id: job.id,
    route,
    score,
    name: job.name,
    fields,
    dependsOn: job.dependsOn,
    dedupId: opts.deduplication?.id ?? "",
    createdAt: job.createdAt,
  };
}

/** Jobs per import script call: one call holds the server for its whole chunk. */
const IMPORT_CHUNK = 1000;

/**
 * A job the import script wrote, as readJob would read it back: its hash is the plan's fields (with
 * the state the script answered, when it changed it), a delayed job's score in `scheduled` the plan's.
 */
function heldAsWritten(queue: string, p: ImportPlan, stateNow: string | undefined): Job {
  const hash = stateNow ? { ...p.fields, state: stateNow } : p.fields;
  const score = p.route === "scheduled" && hash.state === "delayed" ? String(p.score) : null;
  return toJob(queue, hash, score);
}

/**
 * Writes each job unless its id exists (so an interrupted migration resumes); validates all first.
 * One script call per chunk writes its jobs in order and answers what the queue then holds of each
 * (`held`): a job it wrote as its plan (heldAsWritten), one it had already as read from the store.
 */
export async function importJobs(client: RedisClient, queue: string, keys: QueueKeys, jobs: Job[]): Promise<ImportResult> {
  const plans = jobs.map((job) => {
    try {
      return plan(job);
    } catch (error) {
      if (error instanceof ValidationError || error instanceof UnsupportedError) throw error;
      throw new ValidationError(`glidemq-valkey: job ${job.id} cannot be imported: ${String(error)}`);
    }
  });
  const result: Required<ImportResult> = { imported: 0, skipped: [], held: [] };
  for (let start = 0; start < plans.length; start += IMPORT_CHUNK) {
    const chunk = plans.slice(start, start + IMPORT_CHUNK);
    const args = chunk.flatMap((p) => [
      p.id,
      p.route,
      String(p.score),
      p.name,
      JSON.stringify(Object.entries(p.fields).flat()),
      JSON.stringify(p.dependsOn),
      p.dedupId,
      String(p.createdAt),
    ]);
    const replies = (await runScript(
      client,
      "import",
      [keys.id, keys.stream, keys.scheduled, keys.completed, keys.failed, keys.dedup],
      args,
    )) as Array<[1, string?] | [0, string[], string | null, string[]]>;
    chunk.forEach((p, i) => {
      const reply = replies[i] ?? [0, [], null, []];
      if (reply[0] === 1) {
        result.imported++;
        result.held.push(heldAsWritten(queue, p, reply[1]));
        return;
      }
      const [, fields, score, deps] = reply;
      result.skipped.push(p.id);
      result.held.push(fields.length === 0 ? null : toJob(queue, flatToRecord(fields), score, deps));
    });
  }
  return result;
}
