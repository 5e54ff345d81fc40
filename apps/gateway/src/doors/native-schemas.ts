import { EnqueueInputSchema, JOB_STATES, JobErrorSchema, JobSchema, JobStateSchema, JsonSchema, MAX_DELAY_MS } from "@switchyard/core";
import { z } from "zod";

/**
 * The request and response bodies of the native `/v1` door. They validate requests at run time
 * and, registered with their names, become `components.schemas` of the OpenAPI document.
 */
const Worker = z.string().min(1).max(255).describe("Who holds the lease; heartbeat, complete and fail from anyone else are refused.");
const LeaseMs = z
  .number()
  .int()
  .positive()
  .max(7 * 24 * 3600 * 1000)
  .describe("Lease length in milliseconds.");

export const BulkEnqueueBody = z.strictObject({ jobs: z.array(EnqueueInputSchema).min(1).max(1000) });

export const ReserveBody = z.strictObject({
  worker: Worker,
  count: z.number().int().min(1).max(1000).optional().describe("How many jobs to claim at most; default 1."),
  leaseMs: LeaseMs.optional(),
});

export const HeartbeatBody = z.strictObject({ worker: Worker, leaseMs: LeaseMs.optional(), progress: JsonSchema.optional() });

export const CompleteBody = z.strictObject({ worker: Worker.optional(), result: JsonSchema.optional() });

export const FailBody = z.strictObject({
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
});

export const ListQuery = z.strictObject({
  state: z.enum(JOB_STATES, { message: `state must be one of ${JOB_STATES.join(", ")}` }),
  limit: z
    .string()
    .regex(/^\d+$/, "limit must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(1).max(1000))
    .optional()
    .describe("Page size, 1 to 1000; default 100."),
  cursor: z.string().min(1).optional().describe("The `cursor` of the previous page."),
});

export const EnqueueResponse = z.object({ job: JobSchema, created: z.boolean() });
export const BulkEnqueueResponse = z.object({ results: z.array(EnqueueResponse) });
export const JobResponse = z.object({ job: JobSchema });
export const JobsResponse = z.object({ jobs: z.array(JobSchema) });
export const PageResponse = z.object({ jobs: z.array(JobSchema), cursor: z.string().nullable() });
export const CountsResponse = z.object({ queue: z.string(), counts: z.record(JobStateSchema, z.number().int()) });
export const QueuesResponse = z.object({ queues: z.array(z.object({ name: z.string(), backend: z.string() })) });
export const PausedResponse = z.object({ queue: z.string(), paused: z.boolean() });
export const ErrorResponse = z.object({ error: z.object({ code: z.string(), message: z.string() }) });
export const HealthResponse = z.object({
  status: z.enum(["ok", "unavailable"]),
  backends: z.record(z.string(), z.object({ kind: z.string(), ok: z.boolean(), error: z.string().optional() })),
});

/** Names under which the schemas appear in the OpenAPI document. */
export const NAMED_SCHEMAS: Record<string, z.ZodType> = {
  Json: JsonSchema,
  Job: JobSchema,
  EnqueueInput: EnqueueInputSchema,
  BulkEnqueueBody,
  ReserveBody,
  HeartbeatBody,
  CompleteBody,
  FailBody,
  EnqueueResponse,
  BulkEnqueueResponse,
  JobResponse,
  JobsResponse,
  PageResponse,
  CountsResponse,
  QueuesResponse,
  PausedResponse,
  ErrorResponse,
  HealthResponse,
};
