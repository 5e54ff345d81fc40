import { OpenAPIHono, type RouteConfig, createRoute } from "@hono/zod-openapi";
import { NotFoundError, ValidationError } from "@switchyard/core";
import type { MiddlewareHandler } from "hono";
import type { ZodError } from "zod";
import type { GatewayEnv } from "../errors.js";
import { errorFormat, limitBody, readJson } from "../http.js";
import type { Door } from "./door.js";
import * as S from "./native-schemas.js";

const REASONS: Record<number, string> = {
  400: "Bad input: malformed JSON, a field that does not validate",
  404: "No such job, or no route matches the queue",
  409: "The lease was lost or the job is in a state that does not allow this",
  413: "The body is larger than 1 MiB",
  501: "The queue's backend cannot honour this operation",
  503: "The queue's backend is unavailable",
};

/** The error answers a route gives, each with the `{error:{code,message}}` body. */
function errors(...statuses: number[]): RouteConfig["responses"] {
  const body = { content: { "application/json": { schema: S.ErrorResponse } } };
  return Object.fromEntries(statuses.map((status) => [status, { description: REASONS[status] ?? String(status), ...body }]));
}

/** Every route that reaches a backend may meet bad input, an unrouted queue, a store that cannot or is down. */
const BACKEND_ERRORS = [400, 404, 501, 503];

/**
 * Reads the JSON body whatever the Content-Type says (curl -d sends form-encoded headers with JSON
 * bodies), refusing an empty or too deeply nested one, and hands it to the route's validator.
 */
function jsonBody(optional: boolean): MiddlewareHandler<GatewayEnv> {
  return async (c, next) => {
    // The validator parses the cached text again; an optional body left out validates as `{}`.
    // (Hono keeps the body promises in bodyCache, whatever its type says.)
    const cache = c.req.bodyCache as { text?: Promise<string> };
    if ((await readJson(c, { optional })) === undefined) cache.text = Promise.resolve("{}");
    c.req.raw.headers.set("content-type", "application/json");
    await next();
  };
}

function body<T extends import("zod").ZodType>(schema: T, optional = false) {
  return {
    middleware: [jsonBody(optional)],
    body: { content: { "application/json": { schema } }, required: !optional },
  };
}

function route<R extends RouteConfig>(config: R): R {
  return createRoute(config);
}

/** A zod failure as the gateway words every validation error: `invalid body: jobs.1.name: ...`. */
function describeIssues(error: ZodError, target: string): string {
  const what = target === "json" ? "body" : target;
  const details = error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : what}: ${issue.message}`);
  return `invalid ${what}: ${details.join("; ")}`;
}

/** The canonical REST door at `/v1`: every core operation, one route each, described at /openapi.json. */
export const nativeDoor: Door = {
  name: "native",
  mount(app, { router }) {
    const door = new OpenAPIHono<GatewayEnv>({
      defaultHook: (result) => {
        if (!result.success) throw new ValidationError(describeIssues(result.error as ZodError, result.target));
      },
    });
    door.use("*", errorFormat("native"), limitBody);
    const on = (queue: string) => router.backendFor(queue);
    const json = (description: string, schema: import("zod").ZodType) => ({ description, content: { "application/json": { schema } } });

    door.openapi(
      route({
        method: "get",
        path: "/queues",
        summary: "List the queues of every backend with the backend each is routed to",
        responses: { 200: json("The queues", S.QueuesResponse), ...errors(503) },
      }),
      async (c) => c.json({ queues: await router.queues() }, 200),
    );

    const enqueue = body(S.EnqueueInput);
    door.openapi(
      route({
        method: "post",
        path: "/queues/{queue}/jobs",
        summary: "Enqueue one job; a uniqueKey already in use returns the existing job with created=false",
        middleware: enqueue.middleware,
        request: { params: S.QueueParams, body: enqueue.body },
        responses: { 201: json("The job and whether it was created", S.EnqueueResponse), ...errors(...BACKEND_ERRORS, 409, 413) },
      }),
      async (c) => {
        const { queue } = c.req.valid("param");
        return c.json(await on(queue).enqueue(queue, c.req.valid("json")), 201);
      },
    );

    const bulk = body(S.BulkEnqueueBody);
    door.openapi(
      route({
        method: "post",
        path: "/queues/{queue}/jobs/bulk",
        summary: "Enqueue up to 1000 jobs, all or nothing",
        middleware: bulk.middleware,
        request: { params: S.QueueParams, body: bulk.body },
        responses: { 201: json("One result per job, in order", S.BulkEnqueueResponse), ...errors(...BACKEND_ERRORS, 409, 413) },
      }),
      async (c) => {
        const { queue } = c.req.valid("param");
        return c.json({ results: await on(queue).enqueueBulk(queue, c.req.valid("json").jobs) }, 201);
      },
    );

    const reserve = body(S.ReserveBody);
    door.openapi(
      route({
        method: "post",
        path: "/queues/{queue}/reserve",
        summary: "Claim up to `count` due jobs with a lease for `worker`",
        middleware: reserve.middleware,
        request: { params: S.QueueParams, body: reserve.body },
        responses: { 200: json("The claimed jobs (possibly none)", S.JobsResponse), ...errors(...BACKEND_ERRORS, 413) },
      }),
      async (c) => {
        const { queue } = c.req.valid("param");
        return c.json({ jobs: await on(queue).reserve(queue, c.req.valid("json")) }, 200);
      },
    );

    const heartbeat = body(S.HeartbeatBody);
    door.openapi(
      route({
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
      route({
        method: "post",
        path: "/queues/{queue}/jobs/{id}/complete",
        summary: "Complete an active job; with `worker`, only the lease holder may",
        middleware: complete.middleware,
        request: { params: S.JobParams, body: complete.body },
        responses: { 200: json("The completed job", S.JobResponse), ...errors(...BACKEND_ERRORS, 409, 413) },
      }),
      async (c) => {
        const { queue, id } = c.req.valid("param");
        return c.json({ job: await on(queue).complete(queue, id, c.req.valid("json")) }, 200);
      },
    );

    const fail = body(S.FailBody);
    door.openapi(
      route({
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
      route({
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
      route({
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
      route({
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
      route({
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
        route({
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

    app.route("/v1", door);
  },
};
