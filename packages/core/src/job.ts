import { z } from "zod";
import { jsonProblem } from "./json-value.js";
import { storableText } from "./text.js";
import { parseOrThrow } from "./validate.js";

/** The lifecycle states every backend maps its native states onto (see DESIGN.md). */
export const JOB_STATES = ["waiting", "delayed", "active", "completed", "failed", "canceled", "blocked"] as const;
export const JobStateSchema = z.enum(JOB_STATES);
export type JobState = z.infer<typeof JobStateSchema>;

/** Any JSON value. Job data and results must survive every backend's encoding. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
/**
 * A JSON value (jsonProblem says which are), passed on as it came; the issue names where it is not
 * JSON. Its `id` names it wherever it is used in a document made from the schemas (the gateway's
 * OpenAPI document refers to one `Json` component).
 */
export const JsonSchema = z
  .unknown()
  .superRefine((value, context) => {
    const problem = jsonProblem(value);
    if (problem) context.addIssue({ code: "custom", message: problem.message, path: problem.path });
  })
  .meta({ id: "Json", description: "Any JSON value." }) as unknown as z.ZodType<Json>;

/** The longest wait a delay or a backoff may ask for (a year); later runs take an explicit runAt. */
export const MAX_DELAY_MS = 365 * 24 * 60 * 60 * 1000;

/**
 * The latest `runAt`, 2^42 - 1 ms (2109-05-15T07:35:11.103Z): glide-mq's scheduled score is
 * `priority * 2^42 + time`, so a later time would spill into the priority. Every store takes the
 * same bound, so a job moves between stores unchanged.
 */
export const MAX_RUN_AT = 2 ** 42 - 1;

export const BackoffSchema = z.object({
  type: z.enum(["fixed", "exponential"]),
  /** Base delay in milliseconds: fixed waits `delay`, exponential waits `delay * 2^(attempts-1)`. */
  delay: z.number().int().nonnegative().max(MAX_DELAY_MS),
});
export type Backoff = z.infer<typeof BackoffSchema>;

export const JobErrorSchema = z.object({ group: z.string().optional(), message: z.string() });
export type JobError = z.infer<typeof JobErrorSchema>;

export const LeaseSchema = z.object({ worker: z.string(), expiresAt: z.number() });
export type Lease = z.infer<typeof LeaseSchema>;

/** The lingua franca between doors and backends. Times are epoch milliseconds. */
export const JobSchema = z.object({
  id: z.string().min(1),
  queue: z.string().min(1),
  name: z.string(),
  data: JsonSchema,
  state: JobStateSchema,
  /** Larger runs sooner; 0 is the default. Each adapter documents its mapping to the native scale. */
  priority: z.number(),
  /** When a delayed job becomes due (null when it is not delayed). */
  runAt: z.number().nullable(),
  /** How many times the job has been handed to a worker, the current run included. */
  attempts: z.number().int().nonnegative(),
  maxAttempts: z.number().int().positive(),
  backoff: BackoffSchema.nullable(),
  lease: LeaseSchema.nullable(),
  createdAt: z.number(),
  startedAt: z.number().nullable(),
  finishedAt: z.number().nullable(),
  result: JsonSchema.nullable(),
  error: JobErrorSchema.nullable(),
  progress: JsonSchema.nullable(),
  tags: z.array(z.string()),
  dependsOn: z.array(z.string()),
  uniqueKey: z.string().nullable(),
  /**
   * Fields with no core meaning, kept so that a round trip loses nothing. An adapter keeps its own
   * system's fields under that system's name (`native.qless`, `native.glide`, `native.workerqueue`);
   * top-level keys are the producer's own extras (a Cloudq job's extra keys), which every adapter
   * stores and gives back as they came.
   */
  native: z.record(z.string(), z.unknown()),
});
export type Job = z.infer<typeof JobSchema>;

export const DEFAULT_MAX_ATTEMPTS = 3;
export const DEFAULT_LEASE_MS = 60_000;

/** A job's priority: larger runs sooner; whole numbers, as every store keeps them. */
export const PrioritySchema = z.number().int().min(-1_000_000).max(1_000_000);
export const TagsSchema = z.array(z.string().min(1));

/** What a producer may say about a new job. Every field but `name` has a default. */
export const EnqueueInputSchema = z
  .object({
    id: storableText("a job id").optional(),
    // Stored and matched like an id: a NUL or a lone surrogate would not come back as it was sent.
    name: storableText("a job name"),
    data: JsonSchema.default(null),
    priority: PrioritySchema.default(0),
    /** Milliseconds to wait before the job may run; exclusive with `runAt`. */
    delay: z.number().int().nonnegative().max(MAX_DELAY_MS).optional(),
    runAt: z.number().int().nonnegative().max(MAX_RUN_AT).optional(),
    maxAttempts: z.number().int().positive().max(1_000_000).default(DEFAULT_MAX_ATTEMPTS),
    backoff: BackoffSchema.nullable().default(null),
    tags: TagsSchema.default([]),
    dependsOn: z.array(z.string().min(1)).default([]),
    uniqueKey: storableText("a unique key").optional(),
    /**
     * Fields of the producer's protocol with no core meaning (a Cloudq job's extra keys, a glide-mq
     * `opts` object...). An adapter of the same system stores them natively; any other keeps them
     * with its own extras, so they come back in `Job.native`.
     */
    native: z.record(z.string(), z.unknown()).optional(),
  })
  .refine((input) => input.delay === undefined || input.runAt === undefined, {
    message: "give delay or runAt, not both",
    path: ["runAt"],
  });
export type EnqueueInput = z.input<typeof EnqueueInputSchema>;
export type NormalizedEnqueueInput = z.output<typeof EnqueueInputSchema>;

/** Inputs their caller has just parsed with EnqueueInputSchema (see `alreadyNormalized`), each trusted once. */
const normalized = new WeakSet<object>();

/**
 * Marks the output of the caller's own EnqueueInputSchema parse (the gateway's routes validate the
 * body with it), so the backend's `normalizeEnqueueInput` hands it back instead of parsing it again.
 * Trusted once: the next normalization of the same object parses it, in case it was changed since.
 */
export function alreadyNormalized<T extends NormalizedEnqueueInput>(input: T): T {
  normalized.add(input);
  return input;
}

/** Validates and fills defaults; a backend calls this first so every door gets the same errors. */
export function normalizeEnqueueInput(input: EnqueueInput): NormalizedEnqueueInput {
  if (normalized.delete(input)) return input as NormalizedEnqueueInput;
  return parseOrThrow(EnqueueInputSchema, input, "job");
}

/** When a normalized input may first run, or null if it may run at once. */
export function runAtOf(input: NormalizedEnqueueInput, now: number): number | null {
  if (input.runAt !== undefined) return input.runAt > now ? input.runAt : null;
  if (input.delay !== undefined && input.delay > 0) return now + input.delay;
  return null;
}

/** Milliseconds to wait before retry number `attempts` (1-based) under a backoff policy, at most MAX_DELAY_MS. */
export function backoffDelay(backoff: Backoff | null, attempts: number): number {
  if (!backoff) return 0;
  if (backoff.type === "fixed") return backoff.delay;
  return Math.min(MAX_DELAY_MS, backoff.delay * 2 ** Math.max(0, attempts - 1));
}
