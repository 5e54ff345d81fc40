import { EnqueueInputSchema, NotFoundError } from "@switchyard/core";
import { Hono } from "hono";
import type { GatewayEnv } from "../errors.js";
import { errorFormat, limitBody } from "../http.js";
import type { QueueRouter } from "../router.js";
import { type AnyRouteSpec, defineRoute, mountRoutes } from "../routes.js";
import * as S from "./native-schemas.js";

const QUEUE = { queue: "Queue name; the configured routes pick its backend." };
const QUEUE_AND_ID = { ...QUEUE, id: "Job id, as returned when the job was enqueued." };

/** The canonical REST door at `/v1`: every core operation, one route each. */
export function nativeRoutes(router: QueueRouter): AnyRouteSpec[] {
  const on = (queue: string | undefined) => router.backendFor(queue ?? "");
  const jobRoute = (suffix: string) => `/queues/:queue/jobs/:id${suffix}`;

  return [
    defineRoute({
      method: "get",
      path: "/queues",
      summary: "List the queues of every backend with the backend each is routed to",
      success: { status: 200, description: "The queues", schema: S.QueuesResponse },
      handle: async ({ c }) => c.json({ queues: await router.queues() }),
    }),
    defineRoute({
      method: "post",
      path: "/queues/:queue/jobs",
      summary: "Enqueue one job; a uniqueKey already in use returns the existing job with created=false",
      params: QUEUE,
      body: EnqueueInputSchema,
      success: { status: 201, description: "The job and whether it was created", schema: S.EnqueueResponse },
      errors: [404, 501],
      handle: async ({ c, params, body }) => c.json(await on(params.queue).enqueue(params.queue!, body), 201),
    }),
    defineRoute({
      method: "post",
      path: "/queues/:queue/jobs/bulk",
      summary: "Enqueue up to 1000 jobs, all or nothing",
      params: QUEUE,
      body: S.BulkEnqueueBody,
      success: { status: 201, description: "One result per job, in order", schema: S.BulkEnqueueResponse },
      errors: [404, 501],
      handle: async ({ c, params, body }) => c.json({ results: await on(params.queue).enqueueBulk(params.queue!, body.jobs) }, 201),
    }),
    defineRoute({
      method: "post",
      path: "/queues/:queue/reserve",
      summary: "Claim up to `count` due jobs with a lease for `worker`",
      params: QUEUE,
      body: S.ReserveBody,
      success: { status: 200, description: "The claimed jobs (possibly none)", schema: S.JobsResponse },
      errors: [404],
      handle: async ({ c, params, body }) => c.json({ jobs: await on(params.queue).reserve(params.queue!, body) }),
    }),
    defineRoute({
      method: "post",
      path: jobRoute("/heartbeat"),
      summary: "Extend the lease of an active job (and record progress)",
      params: QUEUE_AND_ID,
      body: S.HeartbeatBody,
      success: { status: 200, description: "The job with its new lease", schema: S.JobResponse },
      errors: [404, 409],
      handle: async ({ c, params, body }) => c.json({ job: await on(params.queue).heartbeat(params.queue!, params.id!, body) }),
    }),
    defineRoute({
      method: "post",
      path: jobRoute("/complete"),
      summary: "Complete an active job; with `worker`, only the lease holder may",
      params: QUEUE_AND_ID,
      body: S.CompleteBody,
      bodyOptional: true,
      success: { status: 200, description: "The completed job", schema: S.JobResponse },
      errors: [404, 409],
      handle: async ({ c, params, body }) => c.json({ job: await on(params.queue).complete(params.queue!, params.id!, body) }),
    }),
    defineRoute({
      method: "post",
      path: jobRoute("/fail"),
      summary: "Fail an active job: it retries with backoff while attempts remain, else fails for good",
      params: QUEUE_AND_ID,
      body: S.FailBody,
      success: { status: 200, description: "The job, waiting or delayed for a retry, or failed", schema: S.JobResponse },
      errors: [404, 409],
      handle: async ({ c, params, body }) => c.json({ job: await on(params.queue).fail(params.queue!, params.id!, body) }),
    }),
    defineRoute({
      method: "delete",
      path: jobRoute(""),
      summary: "Cancel a job that is not finished",
      params: QUEUE_AND_ID,
      success: { status: 204, description: "Canceled" },
      errors: [404, 409],
      handle: async ({ c, params }) => {
        await on(params.queue).cancel(params.queue!, params.id!);
        return c.body(null, 204);
      },
    }),
    defineRoute({
      method: "get",
      path: jobRoute(""),
      summary: "Read one job",
      params: QUEUE_AND_ID,
      success: { status: 200, description: "The job", schema: S.JobResponse },
      errors: [404],
      handle: async ({ c, params }) => {
        const job = await on(params.queue).get(params.queue!, params.id!);
        if (!job) throw new NotFoundError(`no job "${params.id}" in queue "${params.queue}"`);
        return c.json({ job });
      },
    }),
    defineRoute({
      method: "get",
      path: "/queues/:queue/jobs",
      summary: "List the jobs in one state, a page at a time",
      params: QUEUE,
      query: S.ListQuery,
      success: { status: 200, description: "One page; pass `cursor` back for the next (null on the last page)", schema: S.PageResponse },
      errors: [404],
      handle: async ({ c, params, query }) => {
        const page = await on(params.queue).list(params.queue!, query);
        return c.json({ jobs: page.items, cursor: page.cursor });
      },
    }),
    defineRoute({
      method: "get",
      path: "/queues/:queue/counts",
      summary: "Count the jobs of a queue by state",
      params: QUEUE,
      success: { status: 200, description: "Counts for every state", schema: S.CountsResponse },
      errors: [404],
      handle: async ({ c, params }) => c.json({ queue: params.queue, counts: await on(params.queue).counts(params.queue!) }),
    }),
    defineRoute({
      method: "post",
      path: "/queues/:queue/pause",
      summary: "Pause a queue: reserve hands out nothing until it is resumed",
      params: QUEUE,
      success: { status: 200, description: "The queue is paused", schema: S.PausedResponse },
      errors: [404, 501],
      handle: async ({ c, params }) => {
        const backend = on(params.queue);
        await backend.pause(params.queue!);
        return c.json({ queue: params.queue, paused: await backend.isPaused(params.queue!) });
      },
    }),
    defineRoute({
      method: "post",
      path: "/queues/:queue/resume",
      summary: "Resume a paused queue",
      params: QUEUE,
      success: { status: 200, description: "The queue is running", schema: S.PausedResponse },
      errors: [404, 501],
      handle: async ({ c, params }) => {
        const backend = on(params.queue);
        await backend.resume(params.queue!);
        return c.json({ queue: params.queue, paused: await backend.isPaused(params.queue!) });
      },
    }),
  ];
}

/** The `/v1` sub-app; errors answer `{error:{code,message}}`. */
export function createNativeDoor(router: QueueRouter): Hono<GatewayEnv> {
  const door = new Hono<GatewayEnv>();
  door.use("*", errorFormat("native"), limitBody);
  mountRoutes(door, nativeRoutes(router));
  return door;
}
