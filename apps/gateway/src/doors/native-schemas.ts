import { z } from "@hono/zod-openapi";
import {
  EnqueueInputSchema,
  JOB_STATES,
  JobErrorSchema,
  JobIdSchema,
  JobSchema,
  JobStateSchema,
  JsonSchema,
  MAX_DELAY_MS,
  MAX_PAGE_SIZE,
  QueueNameSchema,
  WorkerNameSchema,
} from "@switchyard/core";
import type { ZodType } from "zod";
import { JOB_EVENT_TYPES } from "../events.js";

/**
 * The request and response bodies of the native `/v1` door. The same schemas validate requests and,
 * named with `.openapi(name)`, become `components.schemas` of the OpenAPI document.
 */
const Worker = WorkerNameSchema.describe("Who holds the lease; heartbeat, complete and fail from anyone else are refused.");
const LeaseMs = z.number().int().positive().max(MAX_DELAY_MS).describe("Lease length in milliseconds.");

/**
 * Names a schema of @switchyard/core for the document. Zod 4 copies methods onto a schema when it
 * is made, so one made before @hono/zod-openapi added `.openapi` lacks it: call it from the prototype.
 */
function named<T extends ZodType>(schema: T, name: string, metadata: Record<string, unknown> = {}): T {
  const openapi = z.ZodType.prototype.openapi as (this: T, refId: string, metadata: Record<string, unknown>) => T;
  return openapi.call(schema, name, metadata);
}

export const Json = named(JsonSchema, "Json");
export const Job = named(JobSchema, "Job");

/** `delay` and `runAt` exclude each other; the document says so, as the validation does. */
export const EnqueueInput = named(EnqueueInputSchema, "EnqueueInput", { not: { required: ["delay", "runAt"] } });

export const BulkEnqueueBody = z.strictObject({ jobs: z.array(EnqueueInput).min(1).max(MAX_PAGE_SIZE) }).openapi("BulkEnqueueBody");

export const ReserveBody = z
  .strictObject({
    worker: Worker,
    count: z.number().int().min(1).max(MAX_PAGE_SIZE).optional().describe("How many jobs to claim at most; default 1."),
    leaseMs: LeaseMs.optional(),
    wait: z
      .number()
      .int()
      .min(0)
      .max(30_000)
      .optional()
      .describe(
        "Milliseconds to wait for a job when none is due (at most 30 s; default 0). A job enqueued through this gateway ends the wait at once.",
      ),
  })
  .openapi("ReserveBody");

export const HeartbeatBody = z
  .strictObject({ worker: Worker, leaseMs: LeaseMs.optional(), progress: Json.optional() })
  .openapi("HeartbeatBody");

export const CompleteBody = z
  .strictObject({
    worker: Worker.optional(),
    result: Json.optional(),
    next: z
      .strictObject({
        count: z.number().int().min(1).max(MAX_PAGE_SIZE).optional().describe("How many jobs to claim at most; default 1."),
        leaseMs: LeaseMs.optional(),
      })
      .optional()
      .describe("Also claim the worker's next jobs in the same call (one round trip per job for a busy worker); needs `worker`."),
  })
  .refine((body) => body.next === undefined || body.worker !== undefined, {
    message: "next needs worker: the next jobs are leased to it",
    path: ["next"],
  })
  .openapi("CompleteBody");

export const FailBody = z
  .strictObject({
    worker: Worker.optional(),
    error: JobErrorSchema,
    retry: z.boolean().optional().describe("false fails for good at once; otherwise the job retries while attempts remain."),
    retryDelay: z
      .number()
      .int()
      .nonnegative()
      .max(MAX_DELAY_MS)
      .optional()
      .describe("Overrides the job's backoff for this retry, in milliseconds."),
  })
  .openapi("FailBody");

export const ListQuery = z.strictObject({
  state: z.enum(JOB_STATES, { message: `state must be one of ${JOB_STATES.join(", ")}` }),
  limit: z.coerce
    .number({ message: "limit must be a whole number" })
    .int("limit must be a whole number")
    .min(1)
    .max(MAX_PAGE_SIZE)
    .optional()
    .describe(`Page size, 1 to ${MAX_PAGE_SIZE}; default 100.`),
  cursor: z.string().min(1).optional().describe("The `cursor` of the previous page."),
});

export const QueueParams = z.object({
  queue: QueueNameSchema.describe("Queue name; the configured routes pick its backend."),
});
export const JobParams = QueueParams.extend({
  id: JobIdSchema.describe("Job id, as returned when the job was enqueued."),
});

export const EnqueueResponse = z.object({ job: Job, created: z.boolean() }).openapi("EnqueueResponse");
export const BulkEnqueueResponse = z.object({ results: z.array(EnqueueResponse) }).openapi("BulkEnqueueResponse");
export const JobResponse = z.object({ job: Job }).openapi("JobResponse");
export const CompleteResponse = z
  .object({ job: Job, next: z.array(Job).optional().describe("The jobs now leased to the worker, when `next` was asked for.") })
  .openapi("CompleteResponse");
export const JobsResponse = z.object({ jobs: z.array(Job) }).openapi("JobsResponse");
export const PageResponse = z.object({ jobs: z.array(Job), cursor: z.string().nullable() }).openapi("PageResponse");
export const CountsResponse = z.object({ queue: z.string(), counts: z.record(JobStateSchema, z.number().int()) }).openapi("CountsResponse");
export const QueuesResponse = z.object({ queues: z.array(z.object({ name: z.string(), backend: z.string() })) }).openapi("QueuesResponse");
export const PausedResponse = z.object({ queue: z.string(), paused: z.boolean() }).openapi("PausedResponse");
export const ErrorResponse = z.object({ error: z.object({ code: z.string(), message: z.string() }) }).openapi("ErrorResponse");
export const HealthResponse = z
  .object({
    status: z.enum(["ok", "unavailable"]),
    backends: z.record(z.string(), z.object({ kind: z.string(), ok: z.boolean(), error: z.string().optional() })),
  })
  .openapi("HealthResponse");

export const JobEvent = z
  .object({
    id: z.number().int().describe("Orders every event of this gateway process; the SSE `id`."),
    type: z.enum(JOB_EVENT_TYPES),
    backend: z.string(),
    queue: z.string(),
    jobId: z.string().optional().describe("Absent for paused and resumed."),
    time: z.number().int().describe("Epoch milliseconds."),
  })
  .openapi("JobEvent");
