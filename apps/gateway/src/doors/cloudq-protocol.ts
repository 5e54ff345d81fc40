import { z } from "@hono/zod-openapi";
import { type AdapterDescriptor, type EnqueueInput, type Job, type Json, producerExtras } from "@switchyard/core";

/**
 * The Cloudq wire format: what a publish body may be, and how a job reads back. The same zod
 * schemas validate requests and describe them in /openapi.json; their messages are the Cloudq
 * servers' short texts (`klass key required`), the first of which a client gets.
 */

/** The lease holder of jobs reserved through this door; Cloudq's DELETE completes without naming one. */
export const CLOUDQ_WORKER = "cloudq";

/** node-cloudq 2.x: priorities 1..100, lower first, default 100. Core: larger first, default 0. */
const CLOUDQ_DEFAULT_PRIORITY = 100;
/**
 * Core priorities are whole numbers, Cloudq's need not be (1.5 runs between 1 and 2), so Cloudq
 * priority p maps to core `round((100 - p) * 1000)`: in order to a thousandth, default still 0.
 */
const CLOUDQ_PRIORITY_SCALE = 1000;

export function corePriority(cloudqPriority: number): number {
  return Math.round((CLOUDQ_DEFAULT_PRIORITY - cloudqPriority) * CLOUDQ_PRIORITY_SCALE);
}

/** Keys the GET answer sets itself; a job's native fields of the same name must not shadow them. */
const RESERVED_KEYS = new Set(["klass", "args", "id", "job", "status", "ok"]);

/** A Cloudq job: `klass` and `args` as the servers require them; every other key travels with the job. */
const CloudqJob = z.looseObject(
  {
    klass: z.string({ message: "klass key required" }).min(1, "klass key required").describe("The worker class that runs the job."),
    args: z
      .unknown()
      .refine((value) => value !== undefined, "args key required")
      .describe("Its arguments; anything but an array is stored as [args]."),
  },
  { message: "job object required" },
);

const PRIORITY_RANGE = "priority must be a number from 1 (first) to 100 (last)";

/** node-cloudq 2.x stores `priority || 100`: 0 and null are the default, as is no priority at all. */
const CloudqPriority = z
  .preprocess(
    (value) => (value === 0 || value === null ? undefined : value),
    z.number({ message: PRIORITY_RANGE }).min(1, PRIORITY_RANGE).max(100, PRIORITY_RANGE).optional(),
  )
  .openapi({
    anyOf: [{ type: "number", minimum: 1, maximum: 100 }, { const: 0 }, { type: "null" }],
    description: "1 (first) to 100 (last), fractions included; 0, null or none: 100.",
  });

/** The bare `{klass, args}` of the protocol's curl example, as the `{job, priority}` every client sends. */
function asEnvelope(body: unknown): unknown {
  if (typeof body !== "object" || body === null || Array.isArray(body) || "job" in body || !("klass" in body)) return body;
  // node-cloudq reads `priority` beside `job`; in the bare form that is the job object itself.
  const { priority, ...job } = body as Record<string, unknown>;
  return { job, priority };
}

export const PublishBody = z
  .preprocess(
    asEnvelope,
    z.looseObject(
      {
        job: CloudqJob,
        priority: CloudqPriority,
      },
      { message: "job object required" },
    ),
  )
  .describe("`{job: {klass, args, ...}, priority?}`; the bare `{klass, args, priority?}` is accepted too.");

/** A publish as a core enqueue: the job object's other keys travel in `native`. */
export function publishInput(body: z.output<typeof PublishBody>): EnqueueInput {
  const { klass, args, ...extra } = body.job;
  const data = args as Json;
  const input: EnqueueInput = { name: klass, data: Array.isArray(data) ? data : [data] };
  if (body.priority !== undefined) input.priority = corePriority(body.priority);
  if (Object.keys(extra).length > 0) input.native = extra;
  return input;
}

/** The GET answer: the job's fields at the top level as the real servers send them, and the protocol text's `job` wrapper. */
export function reservedBody(job: Job, adapters: readonly AdapterDescriptor[]): Record<string, unknown> {
  const args = Array.isArray(job.data) ? job.data : [job.data];
  const extras = Object.fromEntries(Object.entries(producerExtras(job.native, adapters)).filter(([key]) => !RESERVED_KEYS.has(key)));
  return { ...extras, klass: job.name, args, id: job.id, job: { klass: job.name, args, id: job.id } };
}

export const ReservedJob = z
  .looseObject({
    klass: z.string(),
    args: z.array(z.unknown()),
    id: z.string(),
    job: z.object({ klass: z.string(), args: z.array(z.unknown()), id: z.string() }),
  })
  .describe("The job's fields at the top level, and again under `job`; its other keys as they were published.");
export const CloudqStatus = z.object({ status: z.enum(["success", "empty"]) });
export const CloudqError = z.object({ status: z.literal("error"), message: z.string() });
export const CloudqStats = z.array(
  z.object({ key: z.string(), value: z.object({ published: z.number().int(), consumed: z.number().int(), complete: z.number().int() }) }),
);
