import { z } from "@hono/zod-openapi";
import { JobIdSchema, MAX_PAGE_SIZE, QueueNameSchema, WorkerNameSchema } from "@switchyard/core";
import type { ZodError } from "zod";
import { Json } from "./native-schemas.js";

/*
 * The bodies, queries and answers of the glide-mq door, worded as glide-mq's proxy words its
 * refusals (`opts.priority must not exceed 2048`, `Missing required field: name`), since its clients
 * show them. A failure is answered with the first of them, as the proxy stops at the first.
 */

/** glide-mq's rules on top of the stores': no braces or colons (they would break cluster hash tags). */
const GLIDE_QUEUE = /^[^{}:]*$/;
const hasGlideIdChars = (id: string) =>
  [...id].every((char) => {
    const code = char.codePointAt(0) ?? 0;
    return code >= 0x20 && code !== 0x7f && char !== "{" && char !== "}" && char !== ":";
  });

export const QueueParams = z.object({
  queue: QueueNameSchema.max(256, "Queue name must be at most 256 characters")
    .regex(GLIDE_QUEUE, "Queue name must not contain curly braces or colons")
    .describe("Queue name, as glide-mq's: no braces or colons."),
});
export const JobParams = QueueParams.extend({ id: JobIdSchema.describe("Job id") });

const positive = (key: string) =>
  z
    .number({ error: `opts.${key} must be a positive number` })
    .positive(`opts.${key} must be a positive number`)
    .finite();

/** The options glide-mq's proxy accepts; any other key is refused, as the proxy refuses it. */
const OPTION_SHAPE = {
  jobId: z
    .string({ error: "opts.jobId must be a non-empty string" })
    .min(1, "opts.jobId must be a non-empty string")
    .max(256, "jobId must be at most 256 characters")
    .refine(hasGlideIdChars, "jobId must not contain control characters, curly braces, or colons")
    .pipe(JobIdSchema),
  delay: z
    .number({ error: "opts.delay must be a non-negative number" })
    .finite()
    .nonnegative("opts.delay must be a non-negative number")
    .max(365 * 24 * 3600 * 1000, "opts.delay must be at most a year"),
  priority: z
    .number({ error: "opts.priority must be a non-negative number" })
    .finite()
    .nonnegative("opts.priority must be a non-negative number")
    .max(2048, "opts.priority must not exceed 2048"),
  attempts: positive("attempts").max(1_000_000, "opts.attempts must be at most 1000000"),
  backoff: z.union([
    z.number().nonnegative(),
    z.looseObject({ type: z.string(), delay: z.number().nonnegative().optional(), jitter: z.number().optional() }),
  ]),
  timeout: positive("timeout"),
  removeOnComplete: z.union([z.boolean(), z.number(), z.looseObject({})]),
  removeOnFail: z.union([z.boolean(), z.number(), z.looseObject({})]),
  deduplication: z.looseObject({
    id: z.string({ error: "opts.deduplication.id must be a string" }).min(1).pipe(JobIdSchema),
    ttl: z.number().nonnegative().optional(),
    mode: z.string().optional(),
  }),
  ttl: positive("ttl"),
  ordering: z.looseObject({}),
  cost: positive("cost"),
  lifo: z.boolean({ error: "opts.lifo must be a boolean" }),
};

const strictOptions = <T extends z.ZodRawShape>(shape: T) =>
  z
    .strictObject(shape, {
      error: (issue) => (issue.code === "unrecognized_keys" ? `opts.${issue.keys[0]} is not allowed` : undefined),
    })
    .partial();

export const JobOptions = strictOptions(OPTION_SHAPE).openapi("GlideJobOptions");
const WaitOptions = strictOptions({ ...OPTION_SHAPE, waitTimeout: positive("waitTimeout").max(300_000) });

const JobName = z.string({ error: "Missing required field: name" }).min(1, "Missing required field: name");
export const AddJobBody = z.object({ name: JobName, data: Json.optional(), opts: JobOptions.optional() }).openapi("GlideAddJob");
export const WaitJobBody = z.object({ name: JobName, data: Json.optional(), opts: WaitOptions.optional() });
export const BulkBody = z.object({
  jobs: z.array(AddJobBody, { error: "Missing required field: jobs (array)" }).max(MAX_PAGE_SIZE, `Too many jobs (max ${MAX_PAGE_SIZE})`),
});

export const PriorityBody = z.object({
  priority: z
    .number({ error: "Missing required field: priority (non-negative number)" })
    .finite()
    .nonnegative("Missing required field: priority (non-negative number)")
    .max(2048, "priority must not exceed 2048"),
});
export const DelayBody = z.object({
  delay: z
    .number({ error: "Missing required field: delay (non-negative number)" })
    .finite()
    .nonnegative("Missing required field: delay (non-negative number)")
    .max(365 * 24 * 3600 * 1000, "delay must be at most a year"),
});
export const RetryBody = z.object({ count: z.number().int().nonnegative("count must be >= 0").optional() });

export const integer = (label: string, min: number) =>
  z
    .string()
    .regex(/^-?\d{1,15}$/, `${label} must be an integer`)
    .transform(Number)
    .refine((value) => value >= min || (label === "end" && value === -1), `${label} must be >= ${min}`);
export const flag = (label: string) =>
  z.enum(["true", "false", "1", "0"], { error: `${label} must be true or false` }).transform((raw) => raw === "true" || raw === "1");

export const GLIDE_STATES = ["waiting", "active", "delayed", "completed", "failed"] as const;
export const ListQuery = z.object({
  state: z.enum(GLIDE_STATES, {
    error: (issue) =>
      issue.input === undefined ? "Missing required query param: state" : `state must be one of: ${GLIDE_STATES.join(", ")}`,
  }),
  start: integer("start", 0).optional(),
  end: integer("end", 0).optional(),
  excludeData: flag("excludeData").optional(),
});
export const DrainQuery = z.object({ delayed: flag("delayed").optional() });
export const RetryQuery = z.object({ count: integer("count", 0).optional() });
export const CleanQuery = z.object({
  state: z.enum(["completed", "failed"], {
    error: (issue) => (issue.input === undefined ? "Missing required query param: state" : "state must be one of: completed, failed"),
  }),
  age: z.string({ error: "Missing required query param: age" }).pipe(integer("age", 0)),
  limit: integer("limit", 1).optional(),
});
const metricType = z.enum(["completed", "failed"], {
  error: (issue) => (issue.input === undefined ? "Missing required query param: type" : "type must be one of: completed, failed"),
});
export const MetricsQuery = z.object({ type: metricType, start: integer("start", 0).optional(), end: integer("end", 0).optional() });
const positiveField = z
  .number({ error: "Body must include positive numeric fields: max, duration" })
  .finite()
  .positive("Body must include positive numeric fields: max, duration");
export const RateLimitBody = z.object({ max: positiveField, duration: positiveField });

export const EventsQuery = z.object({ lastId: z.string().optional().describe("Replay after this event id (or Last-Event-ID)") });

/** The worker routes glide-mq's proxy lacks, with /v1's lease semantics. */
export const ReserveBody = z.object({
  worker: WorkerNameSchema,
  count: z.number().int().min(1).max(MAX_PAGE_SIZE).optional(),
  lockDuration: z
    .number()
    .int()
    .positive()
    .max(24 * 3600 * 1000)
    .optional()
    .describe("Lease in ms (glide-mq's name); default 30 s."),
  wait: z.number().int().min(0).max(30_000).optional().describe("Milliseconds to wait for a job when none is due."),
});
export const HeartbeatBody = z.object({
  worker: WorkerNameSchema,
  lockDuration: z
    .number()
    .int()
    .positive()
    .max(24 * 3600 * 1000)
    .optional(),
  progress: Json.optional(),
});
export const CompleteBody = z.object({ worker: WorkerNameSchema, returnvalue: Json.optional() });
export const FailBody = z.object({
  worker: WorkerNameSchema,
  failedReason: z.string({ error: "Missing required field: failedReason" }).max(10_000),
  retry: z.boolean().optional().describe("false fails for good; otherwise the job's attempts and backoff decide."),
});

export const GlideJob = z
  .object({
    id: z.string(),
    name: z.string(),
    data: Json.optional(),
    opts: z.record(z.string(), z.unknown()),
    timestamp: z.number(),
    attemptsMade: z.number(),
    state: z.string(),
    progress: Json,
    returnvalue: Json.optional(),
    failedReason: z.string().optional(),
    finishedOn: z.number().optional(),
    processedOn: z.number().optional(),
    parentId: z.string().optional(),
    parentQueue: z.string().optional(),
    usage: z.record(z.string(), z.unknown()).optional().describe("The AI usage the job reported (job.reportUsage)"),
  })
  .openapi("GlideJob");
export const Added = z.union([
  z.object({ id: z.string(), name: z.string(), timestamp: z.number() }),
  z.object({ skipped: z.literal(true) }),
]);
export const GlideError = z.object({ error: z.string() }).openapi("GlideError");
/** The error answers of a route, each with glide-mq's `{error}` body. */
export const glideErrors = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((status) => [status, { description: `{error} (${status})`, content: { "application/json": { schema: GlideError } } }]),
  );

export const Counts = z.object({
  waiting: z.number(),
  active: z.number(),
  delayed: z.number(),
  completed: z.number(),
  failed: z.number(),
});

/**
 * The first failure as glide-mq's proxy would word it: a missing name before a refused option
 * before a bad value; inside a bulk, prefixed with the job's index (`jobs[2]: opts.delay ...`).
 */
export function describeGlideFailure(error: ZodError): string {
  const rank = (issue: ZodError["issues"][number]) => (issue.path.at(-1) === "name" ? 0 : issue.code === "unrecognized_keys" ? 1 : 2);
  const [first] = [...error.issues].sort((a, b) => rank(a) - rank(b));
  if (!first) return "Bad request";
  const [top, index] = first.path;
  if (top === "jobs" && typeof index === "number") {
    const message = first.message.startsWith("Missing required field: name") ? "missing required field: name" : first.message;
    return `jobs[${index}]: ${message}`;
  }
  return first.message;
}

export const Health = z.object({ queues: z.number(), status: z.literal("ok"), uptime: z.number() });
export const BulkAdded = z.object({ jobs: z.array(Added) });
export const JobList = z.object({ jobs: z.array(GlideJob) });
export const WaitResult = z.object({ result: Json });
export const PriorityChanged = z.object({ priority: z.number(), updated: z.literal(true) });
export const DelayChanged = z.object({ delay: z.number(), updated: z.literal(true) });
export const Promoted = z.object({ promoted: z.literal(true) });
export const Revoked = z.object({ status: z.enum(["revoked", "flagged"]) });
export const Paused = z.object({ paused: z.boolean() });
export const Drained = z.object({ delayed: z.boolean(), drained: z.literal(true) });
export const Retried = z.object({ retried: z.number() });
export const Cleaned = z.object({ removed: z.array(z.string()) });
export const EventText = z.string().describe("`id:`, `event:` and `data:` lines per event; `: keepalive` comments when quiet");
export const JobsResponse = z.object({ jobs: z.array(GlideJob) });
const RateLimit = z.object({ max: z.number(), duration: z.number() });
const Entry = z.record(z.string(), z.unknown()).describe("The scheduler's entry as glide-mq stores it");
export const Schedulers = z.object({ schedulers: z.array(z.object({ name: z.string(), entry: Entry })) });
export const SchedulerAnswer = z.object({ entry: Entry, name: z.string() });
export const SchedulerRemoved = z.object({ removed: z.literal(true) });
export const RateLimitAnswer = z.object({ rateLimit: RateLimit.nullable() });
export const RateLimitRemoved = z.object({ removed: z.literal(true), rateLimit: z.null() });
export const Metrics = z.object({
  count: z.number(),
  data: z.array(z.object({ timestamp: z.number(), count: z.number(), avgDuration: z.number() })),
  meta: z.object({ resolution: z.literal("minute") }),
});
export const Workers = z.object({
  workers: z.array(
    z.object({ id: z.string(), addr: z.string(), pid: z.number(), startedAt: z.number(), age: z.number(), activeJobs: z.number() }),
  ),
});

const epochMs = (label: string) =>
  z.number({ error: `${label} must be a valid Date or timestamp` }).finite(`${label} must be a valid Date or timestamp`);
/** A scheduler's template takes the options an add takes, less those a repeated job cannot have. */
const TemplateOptions = JobOptions.omit({ delay: true, deduplication: true });
/** PUT /schedulers/:id: glide-mq's ScheduleOpts (dates as epoch ms) and JobTemplate; the values are checked where glide-mq checks them. */
export const SchedulerBody = z
  .object({
    schedule: z.object(
      {
        pattern: z.string({ error: "schedule.pattern must be a string" }).max(256).optional(),
        every: z.number({ error: "every must be a positive safe integer" }).optional(),
        repeatAfterComplete: z.number({ error: "repeatAfterComplete must be a positive safe integer" }).optional(),
        tz: z.string({ error: "schedule.tz must be a string" }).max(64).optional(),
        startDate: epochMs("startDate").optional(),
        endDate: epochMs("endDate").optional(),
        limit: z.number({ error: "limit must be a positive integer" }).optional(),
      },
      { error: "Missing required field: schedule" },
    ),
    template: z
      .object({
        name: z.string({ error: "template.name must be a string" }).min(1, "template.name must be a non-empty string").optional(),
        data: Json.optional(),
        opts: TemplateOptions.optional(),
      })
      .optional(),
  })
  .openapi("GlideSchedulerUpsert");
export const SchedulerUpserted = z.object({ upserted: z.literal(true) });

export const DlqQuery = z.object({ start: integer("start", 0).optional(), end: integer("end", 0).optional() });
export const ReplayAllQuery = z.object({ count: integer("count", 1).optional() });
export const ReplayAllBody = z.object({
  count: z.number({ error: "count must be an integer" }).int("count must be an integer").min(1, "count must be >= 1").optional(),
});
export const DeadLetter = z
  .object({
    attemptsMade: z.number(),
    data: Json.optional(),
    failedReason: z.string().optional(),
    id: z.string(),
    name: z.string(),
    originalJobId: z.string().optional(),
    originalQueue: z.string().optional(),
    timestamp: z.number(),
  })
  .openapi("GlideDeadLetter");
export const DeadLetters = z.object({ count: z.number(), jobs: z.array(DeadLetter) });
export const ReplayedAll = z.object({
  jobs: z.array(z.object({ id: z.string(), name: z.string(), sourceId: z.string() })),
  replayed: z.number(),
});
export const Replayed = z.object({ name: z.string(), newJobId: z.string() });
export const DeadLetterRemoved = z.object({ removed: z.literal(true) });
