import type { OpenAPIHono } from "@hono/zod-openapi";
import {
  type Backend,
  type GlideMqExtras,
  type GlideMqQueues,
  NotFoundError,
  UnsupportedError,
  ValidationError,
  hasGlideMqExtras,
  hasGlideMqQueues,
} from "@switchyard/core";
import { HTTPException } from "hono/http-exception";
import type { GatewayEnv } from "../errors.js";
import { BACKEND_ERRORS, body, guarded, json } from "./declare.js";
import * as S from "./glidemq-schemas.js";

/** The store's GlideMqQueues, or a 501 naming the queue's backend. */
export function glideOf(backend: Backend, queue: string, what: string): Backend & GlideMqQueues {
  if (hasGlideMqQueues(backend)) return backend;
  throw new UnsupportedError(`${what} needs glide-mq's queue administration; queue "${queue}" is on a ${backend.kind} backend`);
}

/** The store's GlideMqExtras (suspensions, usage, broadcast, job output streams), or a 501 naming the queue's backend. */
export function extrasOf(backend: Backend, queue: string, what: string): Backend & GlideMqExtras {
  if (hasGlideMqExtras(backend)) return backend;
  throw new UnsupportedError(`${what} is glide-mq's own and needs a store in its layout; queue "${queue}" is on a ${backend.kind} backend`);
}

const ERRORS = S.glideErrors(...BACKEND_ERRORS);

/**
 * The glide-mq door's routes that only a store in glide-mq's layout can answer (GlideMqQueues):
 * removing finished jobs, the queue's global rate limit, per-minute metrics, the worker registry and
 * the job schedulers (glide-mq's workers fire them, and so do reserves through this gateway).
 */
export function mountGlideOnlyRoutes(door: OpenAPIHono<GatewayEnv>, on: (queue: string) => Backend): void {
  door.openapi(
    guarded("glidemq", "admin", {
      method: "delete",
      path: "/queues/{queue}/clean",
      summary: "Remove completed or failed jobs that finished more than `age` seconds ago",
      request: { params: S.QueueParams, query: S.CleanQuery },
      responses: { 200: json("The removed ids", S.Cleaned), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const { state, age, limit = 1000 } = c.req.valid("query");
      const backend = glideOf(on(queue), queue, "removing finished jobs");
      return c.json({ removed: await backend.clean(queue, state, age * 1000, limit) }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/rate-limit",
      summary: "The global rate limit glide-mq's workers keep to, or null",
      request: { params: S.QueueParams },
      responses: { 200: json("The limit", S.RateLimitAnswer), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      return c.json({ rateLimit: await glideOf(on(queue), queue, "a rate limit").rateLimit(queue) }, 200);
    },
  );

  const limit = body(S.RateLimitBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "admin", {
      method: "put",
      path: "/queues/{queue}/rate-limit",
      summary: "Set the global rate limit: at most `max` jobs per `duration` ms across glide-mq's workers",
      middleware: limit.middleware,
      request: { params: S.QueueParams, body: limit.body },
      responses: { 200: json("The limit set", S.RateLimitAnswer), ...S.glideErrors(...BACKEND_ERRORS, 413) },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const { max, duration } = c.req.valid("json");
      await glideOf(on(queue), queue, "a rate limit").setRateLimit(queue, { max, duration });
      return c.json({ rateLimit: { duration, max } }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "admin", {
      method: "delete",
      path: "/queues/{queue}/rate-limit",
      summary: "Remove the global rate limit",
      request: { params: S.QueueParams },
      responses: { 200: json("Removed", S.RateLimitRemoved), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      await glideOf(on(queue), queue, "a rate limit").setRateLimit(queue, null);
      return c.json({ removed: true as const, rateLimit: null }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/metrics",
      summary: "Finished jobs per minute, with their average run time (glide-mq's Queue.getMetrics)",
      request: { params: S.QueueParams, query: S.MetricsQuery },
      responses: { 200: json("The metrics", S.Metrics), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const { type, start = 0, end = -1 } = c.req.valid("query");
      return c.json(await glideOf(on(queue), queue, "glide-mq's metrics").metrics(queue, type, start, end), 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/workers",
      summary: "The glide-mq workers registered on the queue now",
      request: { params: S.QueueParams },
      responses: { 200: json("The workers", S.Workers), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      return c.json({ workers: await glideOf(on(queue), queue, "glide-mq's worker registry").workers(queue) }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/schedulers",
      summary: "The job schedulers (repeatable jobs) with their entries",
      request: { params: S.QueueParams },
      responses: { 200: json("The schedulers", S.Schedulers), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      return c.json({ schedulers: await glideOf(on(queue), queue, "job schedulers").schedulers(queue) }, 200);
    },
  );

  /** The scheduler `name`, or glide-mq's 404. */
  const schedulerOf = async (queue: string, name: string) => {
    const found = (await glideOf(on(queue), queue, "job schedulers").schedulers(queue)).find((scheduler) => scheduler.name === name);
    if (!found) throw new NotFoundError("Scheduler not found");
    return found;
  };

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/schedulers/{id}",
      summary: "One job scheduler's entry",
      request: { params: S.JobParams },
      responses: { 200: json("The scheduler", S.SchedulerAnswer), ...ERRORS },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const { name, entry } = await schedulerOf(queue, id);
      return c.json({ entry, name }, 200);
    },
  );

  const scheduler = body(S.SchedulerBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "admin", {
      method: "put",
      path: "/queues/{queue}/schedulers/{id}",
      summary:
        "Create or change a job scheduler as glide-mq's Queue.upsertJobScheduler stores it (an unchanged schedule keeps its next run)",
      middleware: scheduler.middleware,
      request: { params: S.JobParams, body: scheduler.body },
      responses: { 200: json("Stored", S.SchedulerUpserted), ...S.glideErrors(...BACKEND_ERRORS, 413) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const { schedule, template } = c.req.valid("json");
      const backend = glideOf(on(queue), queue, "creating or changing a job scheduler");
      try {
        await backend.upsertScheduler(queue, id, schedule, template);
      } catch (error) {
        // glide-mq's refusal of a schedule, in its own words (without the adapter's prefix).
        if (error instanceof ValidationError) throw new HTTPException(400, { message: error.message.replace(/^[\w-]+: /, "") });
        throw error;
      }
      return c.json({ upserted: true as const }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "admin", {
      method: "delete",
      path: "/queues/{queue}/schedulers/{id}",
      summary: "Remove a job scheduler (under glide-mq's scheduler lock)",
      request: { params: S.JobParams },
      responses: { 200: json("Removed", S.SchedulerRemoved), ...ERRORS },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      if (!(await glideOf(on(queue), queue, "job schedulers").removeScheduler(queue, id))) throw new NotFoundError("Scheduler not found");
      return c.json({ removed: true as const }, 200);
    },
  );
}
