import { parseOrThrow } from "@switchyard/core";
import type { Context, Hono } from "hono";
import type { z } from "zod";
import type { GatewayEnv } from "./errors.js";
import { readJson } from "./http.js";

/**
 * One route of a zod-described door. The same description registers the Hono handler (which
 * validates with it) and produces the OpenAPI document, so the two cannot drift apart.
 */
export interface RouteSpec<B = unknown, Q = unknown> {
  method: "get" | "post" | "delete";
  /** Hono syntax, relative to the door's mount point: `/queues/:queue/jobs/:id`. */
  path: string;
  summary: string;
  body?: z.ZodType<B>;
  /** The body may be left out entirely (complete without a result). */
  bodyOptional?: boolean;
  /** A zod object over the query string (every value arrives as a string). */
  query?: z.ZodType<Q>;
  /** Descriptions of each path parameter, for the document. */
  params?: Record<string, string>;
  success: { status: number; description: string; schema?: z.ZodType };
  /** Error statuses this route answers besides 400, for the document. */
  errors?: number[];
  handle: (input: { c: Context<GatewayEnv>; params: Record<string, string>; body: B; query: Q }) => Promise<Response>;
}

// biome-ignore lint/suspicious/noExplicitAny: a list of routes with different body and query types.
export type AnyRouteSpec = RouteSpec<any, any>;

/** Infers the handler's body and query types from the route's schemas. */
export function defineRoute<B = undefined, Q = undefined>(spec: RouteSpec<B, Q>): AnyRouteSpec {
  return spec;
}

/** Registers routes on a door's app, validating body and query before the handler runs. */
export function mountRoutes(app: Hono<GatewayEnv>, routes: AnyRouteSpec[]): void {
  for (const route of routes) {
    app.on(route.method.toUpperCase(), route.path, async (c) => {
      const query = route.query ? parseOrThrow(route.query, c.req.query(), "query") : undefined;
      let body: unknown;
      if (route.body) {
        const raw = await readJson(c, { optional: route.bodyOptional });
        body = parseOrThrow(route.body, raw === undefined ? {} : raw, "body");
      }
      return route.handle({ c, params: c.req.param() as Record<string, string>, body, query });
    });
  }
}
