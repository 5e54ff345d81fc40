import type { OpenAPIHono } from "@hono/zod-openapi";
import { type Backend, type GlideMqQueues, UnsupportedError, hasGlideMqQueues } from "@switchyard/core";
import type { GatewayEnv } from "../errors.js";
import { BACKEND_ERRORS, body, guarded, json } from "./declare.js";
import * as S from "./glidemq-schemas.js";

/** The store's GlideMqQueues, or a 501 naming the queue's backend. */
function glideOf(backend: Backend, queue: string, what: string): Backend & GlideMqQueues {
  if (hasGlideMqQueues(backend)) return backend;
  throw new UnsupportedError(`${what} needs glide-mq's queue administration; queue "${queue}" is on a ${backend.kind} backend`);
}

const ERRORS = S.glideErrors(...BACKEND_ERRORS);

/**
 * The glide-mq door's routes that only a store in glide-mq's layout can answer (GlideMqQueues):
 * removing finished jobs, the queue's global rate limit, per-minute metrics and the worker registry.
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
}
