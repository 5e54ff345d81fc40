import { z } from "@hono/zod-openapi";
import { DEFAULT_LEASE_MS, JobIdSchema, MAX_DELAY_MS, MAX_PAGE_SIZE, QueueNameSchema, WorkerNameSchema } from "@switchyard/core";
import { Json } from "./native-schemas.js";

/**
 * The bodies of the Worker Queue door. A job is answered as the row of a legacy `jobs` table reads
 * (spec §1): the columns a Rails app or the web viewer knows, whatever backend holds the job.
 */

/** The legacy `status` column: `complete`, not `completed`, as workqd and rjqueue write it. */
export const WORKERQUEUE_STATUSES = ["pending", "processing", "complete", "error"] as const;

const Queue = QueueNameSchema.describe("The queue; the door's configured queue (default `default`) when left out.");
const Worker = WorkerNameSchema.describe("Who runs the job; progress, complete and error from anyone else are refused.");

export const WorkerQueueJob = z
  .object({
    id: z.string(),
    queue: z.string(),
    name: z.string().describe("The module (workqd) or job class (rjqueue) that runs the job."),
    data: Json,
    status: z.enum(WORKERQUEUE_STATUSES),
    attempts: z.number().int(),
    duration: z.number().int().nullable().describe("Whole seconds of processing, once the job has finished."),
    details: z.string().nullable().describe("What went wrong, for a job in `error`."),
    locked_by: z.string().nullable().describe("The worker or legacy lock id holding a `processing` job."),
    taskable_type: z.string().nullable(),
    taskable_id: z.number().int().nullable(),
    progress: Json.nullable(),
    created_at: z.string().describe("ISO 8601."),
  })
  .openapi("WorkerQueueJob");

export const CreateJobBody = z
  .strictObject({
    name: z.string().min(1).max(255).describe("The module or job class that runs it, as the `name` column."),
    data: Json.optional().describe("The job's input; a legacy worker reads a JSON object."),
    taskable_type: z.string().min(1).max(255).optional().describe("The record the job works for (Rails polymorphic `taskable`)."),
    taskable_id: z.number().int().min(-2_147_483_648).max(2_147_483_647).optional(),
    queue: Queue.optional(),
  })
  .openapi("WorkerQueueCreateJob");

export const JobQuery = z.strictObject({ queue: Queue.optional() });

export const JobIdParams = z.object({ id: JobIdSchema.describe("The job id the create answered.") });

export const ReserveBody = z
  .strictObject({
    worker: Worker,
    queue: Queue.optional(),
    count: z.number().int().min(1).max(MAX_PAGE_SIZE).optional().describe("How many jobs to take at most; default 1."),
    waitMs: z
      .number()
      .int()
      .min(0)
      .max(300_000)
      .optional()
      .describe("How long to wait for a job when none is pending; a datagram on the UDP port or a new job ends the wait. Default 0."),
    leaseMs: z.number().int().positive().max(MAX_DELAY_MS).optional().describe(`Lease length in ms; default ${DEFAULT_LEASE_MS}.`),
  })
  .openapi("WorkerQueueReserve");

export const ProgressBody = z.strictObject({ worker: Worker, queue: Queue.optional(), progress: Json }).openapi("WorkerQueueProgress");
export const CompleteBody = z.strictObject({ worker: Worker.optional(), queue: Queue.optional() }).openapi("WorkerQueueComplete");
export const ErrorBody = z
  .strictObject({
    worker: Worker.optional(),
    queue: Queue.optional(),
    details: z.string().min(1).max(65_535).describe("What went wrong; kept in the `details` column."),
    retry: z.boolean().optional().describe("Run it again while attempts remain; default false, as legacy workers never retry."),
  })
  .openapi("WorkerQueueError");

export const JobResponse = z.object({ job: WorkerQueueJob }).openapi("WorkerQueueJobResponse");
export const JobsResponse = z.object({ jobs: z.array(WorkerQueueJob) }).openapi("WorkerQueueJobsResponse");
export const ProgressResponse = z
  .object({
    id: z.string(),
    status: z.enum(WORKERQUEUE_STATUSES),
    progress: Json.nullable(),
    finished: z.boolean().describe("true once the job is `complete` or `error`: a page can stop polling."),
  })
  .openapi("WorkerQueueProgressResponse");
