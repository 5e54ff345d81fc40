import type { EnqueueInput, Job, JobCounts, JobState, Json } from "@switchyard/core";
import type { z } from "zod";
import type { AddJobBody, Counts, GlideJob, JobOptions } from "./glidemq-schemas.js";

/*
 * glide-mq's job and its options, onto core's and back. A glidemq-valkey store keeps the options as
 * glide-mq does (the `opts` given here are stored verbatim); another store keeps them among the
 * job's native fields, so the door gives them back as they came.
 */

type GlideOptions = z.infer<typeof JobOptions>;
export type GlideJobJson = z.infer<typeof GlideJob>;

/**
 * glide-mq runs priorities 1 (first) to 2048, then priority-0 jobs; core's larger priority runs
 * sooner, 0 by default. The same map as glidemq-valkey's, so a job keeps its place on either side.
 */
export function corePriority(glide: number): number {
  return glide > 0 ? 2049 - Math.min(Math.round(glide), 2048) : 0;
}

/** The core enqueue of a glide-mq add: name, data and the options core has a field for. */
export function toEnqueueInput(body: z.infer<typeof AddJobBody>): EnqueueInput {
  const opts: GlideOptions = body.opts ?? {};
  const backoff = typeof opts.backoff === "object" ? opts.backoff : undefined;
  const policy = backoff?.type === "fixed" || backoff?.type === "exponential" ? backoff.type : undefined;
  return {
    name: body.name,
    data: (body.data ?? null) as Json,
    ...(opts.jobId !== undefined ? { id: opts.jobId } : {}),
    ...(opts.delay ? { delay: Math.round(opts.delay) } : {}),
    priority: corePriority(opts.priority ?? 0),
    // glide-mq's attempts count every run, as core's maxAttempts do; none given means one run.
    maxAttempts: Math.max(1, Math.round(opts.attempts ?? 1)),
    ...(policy ? { backoff: { type: policy, delay: Math.round(backoff?.delay ?? 0) } } : {}),
    ...(opts.deduplication ? { uniqueKey: opts.deduplication.id } : {}),
    native: { opts },
  };
}

/** The state glide-mq's getState() would give: a glide-mq job's own, else core's in glide-mq's words. */
export const GLIDE_STATE_OF: Record<JobState, string> = {
  waiting: "waiting",
  delayed: "delayed",
  active: "active",
  completed: "completed",
  failed: "failed",
  canceled: "failed",
  blocked: "waiting-children",
};

function record(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** The usage a job reported (its `usage:*` fields), as glide-mq's Job.fromHash reads it; undefined when none. */
function usageOf(fields: Record<string, unknown>): Record<string, unknown> | undefined {
  const text = (field: string) =>
    typeof fields[`usage:${field}`] === "string" && fields[`usage:${field}`] !== "" ? (fields[`usage:${field}`] as string) : undefined;
  if (!["model", "tokens", "provider", "costs", "totalTokens", "totalCost", "costUnit"].some((field) => text(field) !== undefined))
    return undefined;
  const numbers = (raw: string | undefined) => {
    try {
      const parsed = raw === undefined ? undefined : (JSON.parse(raw) as unknown);
      return parsed && typeof parsed === "object" ? parsed : undefined;
    } catch {
      return undefined;
    }
  };
  const integer = (raw: string | undefined) => (raw === undefined ? undefined : Number.parseInt(raw, 10));
  const cached = text("cached");
  // JSON drops the undefined ones, as it drops them from glide-mq's answer.
  return {
    model: text("model"),
    provider: text("provider"),
    tokens: numbers(text("tokens")),
    totalTokens: integer(text("totalTokens")),
    costs: numbers(text("costs")),
    totalCost: text("totalCost") === undefined ? undefined : Number.parseFloat(text("totalCost")!),
    costUnit: text("costUnit"),
    latencyMs: integer(text("latencyMs")),
    cached: cached === "1" ? true : cached === "0" ? false : undefined,
  };
}

/** A job as glide-mq's proxy serialises one (§4.3); `state` as the route asked for it, when it did. */
export function asGlideJob(job: Job, options: { excludeData?: boolean; state?: string } = {}): GlideJobJson {
  const glide = record(job.native.glide);
  const fields = record(glide?.fields) ?? {};
  const opts = record(glide?.opts) ?? record(job.native.opts) ?? {};
  const glideState = typeof glide?.state === "string" ? glide.state : GLIDE_STATE_OF[job.state];
  const runs = job.state === "active" || job.state === "completed" ? 1 : 0;
  const finished = job.state === "completed" || job.state === "failed" || job.state === "canceled";
  const out: GlideJobJson = {
    id: job.id,
    name: job.name,
    ...(options.excludeData ? {} : { data: job.data }),
    opts,
    timestamp: job.createdAt,
    attemptsMade: Math.max(0, job.attempts - runs),
    state: options.state ?? (glideState === "prioritized" ? "waiting" : glideState),
    progress: job.progress ?? 0,
  };
  if (job.state === "completed") out.returnvalue = job.result;
  if (job.error) out.failedReason = job.error.message;
  if (finished && job.finishedAt !== null) out.finishedOn = job.finishedAt;
  if (job.startedAt !== null) out.processedOn = job.startedAt;
  if (typeof fields.parentId === "string") out.parentId = fields.parentId;
  if (typeof fields.parentQueue === "string") out.parentQueue = fields.parentQueue;
  const usage = usageOf(fields);
  if (usage) out.usage = usage;
  return out;
}

/** glide-mq's five counts from core's: a revoked (canceled) job is a failed one there. */
export function glideCounts(counts: JobCounts): z.infer<typeof Counts> {
  return {
    waiting: counts.waiting,
    active: counts.active,
    delayed: counts.delayed,
    completed: counts.completed,
    failed: counts.failed + counts.canceled,
  };
}

/** The core states a glide-mq state lists. */
export const CORE_STATES_OF: Record<string, JobState[]> = {
  waiting: ["waiting"],
  active: ["active"],
  delayed: ["delayed"],
  completed: ["completed"],
  failed: ["failed", "canceled"],
};
