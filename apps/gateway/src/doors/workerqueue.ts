import { type Job, NotFoundError } from "@switchyard/core";
import type { Context } from "hono";
import type { z } from "zod";
import { type Access, requireAccess } from "../auth.js";
import type { GatewayEnv } from "../errors.js";
import { clientGone, errorFormat, limitBody } from "../http.js";
import { BACKEND_ERRORS, body, declaredDoor, errors, guarded, json } from "./declare.js";
import type { Door } from "./door.js";
import * as S from "./workerqueue-schemas.js";

/** Where a workerqueue-sql row keeps its legacy columns in `Job.native`; other backends keep what the door gave. */
const NATIVE_KEY = "workerqueue";

type WorkerQueueJob = z.infer<typeof S.WorkerQueueJob>;
type Status = WorkerQueueJob["status"];

const STATUS_OF: Record<Job["state"], Status> = {
  waiting: "pending",
  delayed: "pending",
  blocked: "pending",
  active: "processing",
  completed: "complete",
  failed: "error",
  canceled: "error",
};

function legacyColumns(job: Job): Record<string, unknown> {
  const own = job.native[NATIVE_KEY];
  return own !== null && typeof own === "object" && !Array.isArray(own) ? (own as Record<string, unknown>) : {};
}

/** A job as its row in a legacy `jobs` table reads, whichever backend holds it. */
export function asRow(job: Job): WorkerQueueJob {
  const own = legacyColumns(job);
  const status = STATUS_OF[job.state];
  // rjqueue writes `duration` itself; otherwise it is the processing time Switchyard recorded.
  const duration =
    typeof own.duration === "number"
      ? own.duration
      : job.startedAt !== null && job.finishedAt !== null
        ? Math.max(0, Math.round((job.finishedAt - job.startedAt) / 1000))
        : null;
  // A row a legacy daemon holds has no Switchyard lease, only its lock id.
  const legacyLock = typeof own.locked_queue_id === "string" && own.locked_queue_id !== "" ? own.locked_queue_id : null;
  return {
    id: job.id,
    queue: job.queue,
    name: job.name,
    data: job.data,
    status,
    attempts: job.attempts,
    duration,
    details: job.error?.message ?? null,
    locked_by: status === "processing" ? (job.lease?.worker ?? legacyLock) : null,
    taskable_type: typeof own.taskable_type === "string" ? own.taskable_type : null,
    taskable_id: typeof own.taskable_id === "number" ? own.taskable_id : null,
    progress: job.progress,
    created_at: new Date(job.createdAt).toISOString(),
  };
}

const FINISHED: ReadonlySet<Status> = new Set(["complete", "error"]);

/**
 * The Worker Queue door at `/workerqueue`: what a Rails app did with INSERT and a datagram, over
 * HTTP, onto any backend; a job reads back as its legacy row. HTTP workers reserve, report progress
 * and finish jobs here, and a reserve may wait, woken by a new job or a datagram on the UDP port.
 */
export const workerQueueDoor: Door = {
  name: "workerqueue",
  mount(app, { router, config, wakeups }) {
    const door = declaredDoor();
    door.use("*", errorFormat("native"), limitBody);
    const defaultQueue = config.doors.workerqueue.queue;
    /** The request's queue (the door's own when it names none), once its token may use it. */
    const queueOf = (c: Context<GatewayEnv>, given: string | undefined, access: Access) => {
      const queue = given ?? defaultQueue;
      requireAccess(c, "workerqueue", access, queue);
      return queue;
    };
    const jobIn = async (queue: string, id: string) => {
      const job = await router.backendFor(queue).get(queue, id);
      if (!job) throw new NotFoundError(`no job "${id}" in queue "${queue}"`);
      return job;
    };

    const create = body(S.CreateJobBody);
    door.openapi(
      guarded("workerqueue", "write", {
        method: "post",
        path: "/jobs",
        summary: "Create a pending job, as a legacy producer's INSERT (and datagram) did",
        middleware: create.middleware,
        request: { body: create.body },
        responses: { 201: json("The new job, as its row", S.JobResponse), ...errors(...BACKEND_ERRORS, 413) },
      }),
      async (c) => {
        const { queue: given, name, data, taskable_type, taskable_id } = c.req.valid("json");
        const queue = queueOf(c, given, "write");
        const taskable = { taskable_type, taskable_id };
        const defined = Object.fromEntries(Object.entries(taskable).filter(([, value]) => value !== undefined));
        const input = { name, data: data ?? null, ...(Object.keys(defined).length > 0 ? { native: { [NATIVE_KEY]: defined } } : {}) };
        const { job } = await router.backendFor(queue).enqueue(queue, input);
        return c.json({ job: asRow(job) }, 201);
      },
    );

    door.openapi(
      guarded("workerqueue", "read", {
        method: "get",
        path: "/jobs/{id}",
        summary: "Read a job as its row: status, attempts, duration, details, locked_by",
        request: { params: S.JobIdParams, query: S.JobQuery },
        responses: { 200: json("The job", S.JobResponse), ...errors(...BACKEND_ERRORS) },
      }),
      async (c) => {
        const { id } = c.req.valid("param");
        return c.json({ job: asRow(await jobIn(queueOf(c, c.req.valid("query").queue, "read"), id)) }, 200);
      },
    );

    door.openapi(
      guarded("workerqueue", "read", {
        method: "get",
        path: "/jobs/{id}/progress",
        summary: "A job's status and progress, for a web page to poll until `finished`",
        request: { params: S.JobIdParams, query: S.JobQuery },
        responses: { 200: json("Status and progress, never cached", S.ProgressResponse), ...errors(...BACKEND_ERRORS) },
      }),
      async (c) => {
        const { id } = c.req.valid("param");
        const row = asRow(await jobIn(queueOf(c, c.req.valid("query").queue, "read"), id));
        c.header("Cache-Control", "no-store");
        return c.json({ id: row.id, status: row.status, progress: row.progress, finished: FINISHED.has(row.status) }, 200);
      },
    );

    const progress = body(S.ProgressBody);
    door.openapi(
      guarded("workerqueue", "write", {
        method: "post",
        path: "/jobs/{id}/progress",
        summary: "Record a processing job's progress (and extend its lease)",
        middleware: progress.middleware,
        request: { params: S.JobIdParams, body: progress.body },
        responses: { 200: json("The job", S.JobResponse), ...errors(...BACKEND_ERRORS, 409, 413) },
      }),
      async (c) => {
        const { id } = c.req.valid("param");
        const { queue: given, worker, progress: value } = c.req.valid("json");
        const queue = queueOf(c, given, "write");
        return c.json({ job: asRow(await router.backendFor(queue).heartbeat(queue, id, { worker, progress: value })) }, 200);
      },
    );

    const reserve = body(S.ReserveBody);
    door.openapi(
      guarded("workerqueue", "write", {
        method: "post",
        path: "/reserve",
        summary: "Take pending jobs for a worker, waiting up to `waitMs` for one",
        middleware: reserve.middleware,
        request: { body: reserve.body },
        responses: {
          200: json("The jobs taken, now processing (none if the wait ran out)", S.JobsResponse),
          ...errors(...BACKEND_ERRORS, 413),
        },
      }),
      async (c) => {
        const { queue: given, worker, count, waitMs, leaseMs } = c.req.valid("json");
        const queue = queueOf(c, given, "write");
        const backend = router.backendFor(queue);
        const take = async () => {
          const jobs = await backend.reserve(queue, { worker, count, leaseMs });
          return jobs.length > 0 ? jobs : undefined;
        };
        const jobs = (await wakeups.reserveWaiting(queue, take, waitMs ?? 0, clientGone(c))) ?? [];
        return c.json({ jobs: jobs.map(asRow) }, 200);
      },
    );

    const complete = body(S.CompleteBody, true);
    door.openapi(
      guarded("workerqueue", "write", {
        method: "post",
        path: "/jobs/{id}/complete",
        summary: "Mark a processing job `complete`",
        middleware: complete.middleware,
        request: { params: S.JobIdParams, body: complete.body },
        responses: { 200: json("The job", S.JobResponse), ...errors(...BACKEND_ERRORS, 409, 413) },
      }),
      async (c) => {
        const { id } = c.req.valid("param");
        const { queue: given, worker } = c.req.valid("json");
        const queue = queueOf(c, given, "write");
        return c.json({ job: asRow(await router.backendFor(queue).complete(queue, id, worker === undefined ? {} : { worker })) }, 200);
      },
    );

    const error = body(S.ErrorBody);
    door.openapi(
      guarded("workerqueue", "write", {
        method: "post",
        path: "/jobs/{id}/error",
        summary: "Mark a processing job `error` with `details`",
        middleware: error.middleware,
        request: { params: S.JobIdParams, body: error.body },
        responses: {
          200: json("The job: `error`, or `pending` again when retried", S.JobResponse),
          ...errors(...BACKEND_ERRORS, 409, 413),
        },
      }),
      async (c) => {
        const { id } = c.req.valid("param");
        const { queue: given, worker, details, retry } = c.req.valid("json");
        const queue = queueOf(c, given, "write");
        const failed = await router.backendFor(queue).fail(queue, id, { worker, error: { message: details }, retry: retry ?? false });
        return c.json({ job: asRow(failed) }, 200);
      },
    );

    app.route("/workerqueue", door);
  },
};
