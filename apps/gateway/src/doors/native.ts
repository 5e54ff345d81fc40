import { z } from "@hono/zod-openapi";
import { NotFoundError, alreadyNormalized, completeAndReserve } from "@switchyard/core";
import { allowsQueue } from "../auth.js";
import { clientGone, errorFormat, limitBody } from "../http.js";
import { BACKEND_ERRORS, body, declaredDoor, errors, guarded, json } from "./declare.js";
import type { Door } from "./door.js";
import { EVENT_ID_PATTERN, streamEvents } from "./event-stream.js";
import { mountNativeActions } from "./native-actions.js";
import { mountMigrationRoutes } from "./native-migrations.js";
import * as S from "./native-schemas.js";

/** The canonical REST door at `/v1`: every core operation, one route each, described at /openapi.json. */
export const nativeDoor: Door = {
  name: "native",
  mount(app, { router, wakeups, events, backends, migrations }) {
    const door = declaredDoor();
    door.use("*", errorFormat("native"), limitBody);
    const on = (queue: string) => router.backendFor(queue);

    door.openapi(
      guarded("native", "read", {
        method: "get",
        path: "/queues",
        summary: "List the queues of every backend with the backend each is routed to",
        responses: { 200: json("The queues", S.QueuesResponse), ...errors(503) },
      }),
      async (c) => c.json({ queues: (await router.queues()).filter(({ name }) => allowsQueue(c, name)) }, 200),
    );

    const enqueue = body(S.EnqueueInput);
    door.openapi(
      guarded("native", "write", {
        method: "post",
        path: "/queues/{queue}/jobs",
        summary: "Enqueue one job; a uniqueKey already in use returns the existing job with created=false",
        middleware: enqueue.middleware,
        request: { params: S.QueueParams, body: enqueue.body },
        responses: { 201: json("The job and whether it was created", S.EnqueueResponse), ...errors(...BACKEND_ERRORS, 409, 413) },
      }),
      async (c) => {
        const { queue } = c.req.valid("param");
        // The body was parsed with EnqueueInputSchema just now: the backend need not parse it again.
        return c.json(await on(queue).enqueue(queue, alreadyNormalized(c.req.valid("json"))), 201);
      },
    );

    const bulk = body(S.BulkEnqueueBody);
    door.openapi(
      guarded("native", "write", {
        method: "post",
        path: "/queues/{queue}/jobs/bulk",
        summary: "Enqueue up to 1000 jobs, all or nothing",
        middleware: bulk.middleware,
        request: { params: S.QueueParams, body: bulk.body },
        responses: { 201: json("One result per job, in order", S.BulkEnqueueResponse), ...errors(...BACKEND_ERRORS, 409, 413) },
      }),
      async (c) => {
        const { queue } = c.req.valid("param");
        return c.json({ results: await on(queue).enqueueBulk(queue, c.req.valid("json").jobs.map(alreadyNormalized)) }, 201);
      },
    );

    const reserve = body(S.ReserveBody);
    door.openapi(
      guarded("native", "write", {
        method: "post",
        path: "/queues/{queue}/reserve",
        summary: "Claim up to `count` due jobs with a lease for `worker`, waiting up to `wait` ms for one",
        middleware: reserve.middleware,
        request: { params: S.QueueParams, body: reserve.body },
        responses: { 200: json("The claimed jobs (possibly none)", S.JobsResponse), ...errors(...BACKEND_ERRORS, 413) },
      }),
      async (c) => {
        const { queue } = c.req.valid("param");
        const { wait, ...options } = c.req.valid("json");
        const take = async () => {
          const jobs = await on(queue).reserve(queue, options);
          return jobs.length > 0 ? jobs : undefined;
        };
        return c.json({ jobs: (await wakeups.reserveWaiting(queue, take, wait ?? 0, clientGone(c))) ?? [] }, 200);
      },
    );

    const heartbeat = body(S.HeartbeatBody);
    door.openapi(
      guarded("native", "write", {
        method: "post",
        path: "/queues/{queue}/jobs/{id}/heartbeat",
        summary: "Extend the lease of an active job (and record progress)",
        middleware: heartbeat.middleware,
        request: { params: S.JobParams, body: heartbeat.body },
        responses: { 200: json("The job with its new lease", S.JobResponse), ...errors(...BACKEND_ERRORS, 409, 413) },
      }),
      async (c) => {
        const { queue, id } = c.req.valid("param");
        return c.json({ job: await on(queue).heartbeat(queue, id, c.req.valid("json")) }, 200);
      },
    );

    const complete = body(S.CompleteBody, true);
    door.openapi(
      guarded("native", "write", {
        method: "post",
        path: "/queues/{queue}/jobs/{id}/complete",
        summary: "Complete an active job; with `worker`, only the lease holder may",
        middleware: complete.middleware,
        request: { params: S.JobParams, body: complete.body },
        responses: {
          200: json("The completed job, and the worker's next jobs when asked for", S.CompleteResponse),
          ...errors(...BACKEND_ERRORS, 409, 413),
        },
      }),
      async (c) => {
        const { queue, id } = c.req.valid("param");
        const { next, ...options } = c.req.valid("json");
        if (next === undefined) return c.json({ job: await on(queue).complete(queue, id, options) }, 200);
        const done = await completeAndReserve(on(queue), queue, id, options, { ...next, worker: options.worker as string });
        return c.json({ job: done.completed, next: done.next }, 200);
      },
    );

    const fail = body(S.FailBody);
    door.openapi(
      guarded("native", "write", {
        method: "post",
        path: "/queues/{queue}/jobs/{id}/fail",
        summary: "Fail an active job: it retries with backoff while attempts remain, else fails for good",
        middleware: fail.middleware,
        request: { params: S.JobParams, body: fail.body },
        responses: {
          200: json("The job, waiting or delayed for a retry, or failed", S.JobResponse),
          ...errors(...BACKEND_ERRORS, 409, 413),
        },
      }),
      async (c) => {
        const { queue, id } = c.req.valid("param");
        return c.json({ job: await on(queue).fail(queue, id, c.req.valid("json")) }, 200);
      },
    );

    door.openapi(
      guarded("native", "admin", {
        method: "delete",
        path: "/queues/{queue}/jobs/{id}",
        summary: "Cancel a job that is not finished",
        request: { params: S.JobParams },
        responses: { 204: { description: "Canceled" }, ...errors(...BACKEND_ERRORS, 409) },
      }),
      async (c) => {
        const { queue, id } = c.req.valid("param");
        await on(queue).cancel(queue, id);
        return c.body(null, 204);
      },
    );

    door.openapi(
      guarded("native", "read", {
        method: "get",
        path: "/queues/{queue}/jobs/{id}",
        summary: "Read one job",
        request: { params: S.JobParams },
        responses: { 200: json("The job", S.JobResponse), ...errors(...BACKEND_ERRORS) },
      }),
      async (c) => {
        const { queue, id } = c.req.valid("param");
        const job = await on(queue).get(queue, id);
        if (!job) throw new NotFoundError(`no job "${id}" in queue "${queue}"`);
        return c.json({ job }, 200);
      },
    );

    door.openapi(
      guarded("native", "read", {
        method: "get",
        path: "/queues/{queue}/jobs",
        summary: "List the jobs in one state, a page at a time",
        request: { params: S.QueueParams, query: S.ListQuery },
        responses: {
          200: json("One page; pass `cursor` back for the next (null on the last page)", S.PageResponse),
          ...errors(...BACKEND_ERRORS),
        },
      }),
      async (c) => {
        const { queue } = c.req.valid("param");
        const page = await on(queue).list(queue, c.req.valid("query"));
        return c.json({ jobs: page.items, cursor: page.cursor }, 200);
      },
    );

    door.openapi(
      guarded("native", "read", {
        method: "get",
        path: "/queues/{queue}/counts",
        summary: "Count the jobs of a queue by state",
        request: { params: S.QueueParams },
        responses: { 200: json("Counts for every state", S.CountsResponse), ...errors(...BACKEND_ERRORS) },
      }),
      async (c) => {
        const { queue } = c.req.valid("param");
        return c.json({ queue, counts: await on(queue).counts(queue) }, 200);
      },
    );

    for (const action of ["pause", "resume"] as const) {
      door.openapi(
        guarded("native", "admin", {
          method: "post",
          path: `/queues/{queue}/${action}`,
          summary: action === "pause" ? "Pause a queue: reserve hands out nothing until it is resumed" : "Resume a paused queue",
          request: { params: S.QueueParams },
          responses: {
            200: json(action === "pause" ? "The queue is paused" : "The queue is running", S.PausedResponse),
            ...errors(...BACKEND_ERRORS),
          },
        }),
        async (c) => {
          const { queue } = c.req.valid("param");
          const backend = on(queue);
          await backend[action](queue);
          return c.json({ queue, paused: await backend.isPaused(queue) }, 200);
        },
      );
    }

    mountNativeActions(door, router);
    mountMigrationRoutes(door, migrations);

    const EventsQuery = z.object({
      lastId: z.string().regex(EVENT_ID_PATTERN).optional().describe("Replay from after this event id (the Last-Event-ID header wins)."),
    });
    const sse = {
      description: "Server-Sent Events: `id:`, `event:` (the type) and `data:` (the event as JSON)",
      content: { "text/event-stream": { schema: S.JobEvent } },
    };
    door.openapi(
      guarded("native", "read", {
        method: "get",
        path: "/queues/{queue}/events",
        summary: "Watch a queue's jobs move: enqueued, delayed, active, progress, completed, failed, retrying, canceled, paused, resumed",
        request: { params: S.QueueParams, query: EventsQuery },
        responses: { 200: sse, ...errors(400, 404) },
      }),
      (c) => {
        const { queue } = c.req.valid("param");
        const backend = router.resolve(queue).name;
        events.watchQueue(queue);
        return streamEvents(c, events, (event) => event.queue === queue, { backends: [backend] }) as never;
      },
    );
    door.openapi(
      guarded("native", "read", {
        method: "get",
        path: "/events",
        summary: "Watch the jobs of every queue the token may see",
        request: { query: EventsQuery },
        responses: { 200: sse, ...errors(400) },
      }),
      (c) => streamEvents(c, events, (event) => allowsQueue(c, event.queue), { backends: [...backends.keys()] }) as never,
    );

    app.route("/v1", door);
  },
};
