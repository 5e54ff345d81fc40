import { OpenAPIHono, type RouteConfig, createRoute } from "@hono/zod-openapi";
import { ValidationError } from "@switchyard/core";
import type { MiddlewareHandler } from "hono";
import type { ZodError, ZodType } from "zod";
import { type Access, needs, securityOf } from "../auth.js";
import type { GatewayEnv } from "../errors.js";
import { readJson } from "../http.js";
import { ErrorResponse } from "./native-schemas.js";

/*
 * What the doors declared with @hono/zod-openapi share: routes whose zod schemas both validate the
 * request and describe it in /openapi.json, the error answers they list, and JSON bodies read the
 * gateway's way. A validation failure is a ValidationError, answered in the door's own error shape.
 */

const REASONS: Record<number, string> = {
  400: "Bad input: malformed JSON, a field that does not validate (on /qless also a refusal by qless's own rules, code QLESS_ERROR)",
  404: "No such job, or no route matches the queue",
  409: "The lease was lost or the job is in a state that does not allow this",
  401: "Tokens are configured and the request has no known one (`Authorization: Bearer <token>`)",
  403: "The token lacks the access level, the door or the queue this needs",
  413: "The body is larger than 1 MiB",
  429: "The token is over its rate limit; `Retry-After` says when to try again",
  501: "The queue's backend cannot honour this operation",
  503: "The queue's backend is unavailable",
};

/** The error answers a route gives, each with the `{error:{code,message}}` body. */
export function errors(...statuses: number[]): RouteConfig["responses"] {
  const body = { content: { "application/json": { schema: ErrorResponse } } };
  return Object.fromEntries(statuses.map((status) => [status, { description: REASONS[status] ?? String(status), ...body }]));
}

/** Every route that reaches a backend may meet bad input, an unrouted queue, a store that cannot or is down. */
export const BACKEND_ERRORS = [400, 404, 501, 503];

/**
 * Reads the JSON body whatever the Content-Type says (curl -d sends form-encoded headers with JSON
 * bodies), refusing an empty or too deeply nested one, and hands it to the route's validator.
 */
function jsonBody(optional: boolean, malformed?: string): MiddlewareHandler<GatewayEnv> {
  return async (c, next) => {
    // The validator parses the cached text again; an optional body left out validates as `{}`.
    // (Hono keeps the body promises in bodyCache, whatever its type says.)
    const cache = c.req.bodyCache as { text?: Promise<string> };
    if ((await readJson(c, { optional, ...(malformed ? { malformed } : {}) })) === undefined) cache.text = Promise.resolve("{}");
    c.req.raw.headers.set("content-type", "application/json");
    await next();
  };
}

/** A route's JSON body; `malformed` words the refusal of one that does not parse (glide-mq says `Bad request`). */
export function body<T extends ZodType>(schema: T, optional = false, malformed?: string) {
  return {
    middleware: [jsonBody(optional, malformed)],
    body: { content: { "application/json": { schema } }, required: !optional },
  };
}

export function route<R extends RouteConfig>(config: R): R {
  return createRoute(config);
}

/**
 * A route that needs a token of `access` on `door` when tokens are configured: checked before the
 * route's own middleware (against the path's queue, if any), and listed as its role in the document.
 */
export function guarded<R extends RouteConfig>(door: string, access: Access, config: R): R {
  const own = config.middleware === undefined ? [] : Array.isArray(config.middleware) ? config.middleware : [config.middleware];
  return createRoute({
    ...config,
    security: securityOf(access),
    middleware: [needs(door, access), ...own],
    responses: { ...config.responses, ...errors(401, 403, 429) },
  });
}

/** A zod failure as the gateway words every validation error: `invalid body: jobs.1.name: ...`. */
function describeIssues(error: ZodError, target: string): string {
  const what = target === "json" ? "body" : target;
  const details = error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : what}: ${issue.message}`);
  return `invalid ${what}: ${details.join("; ")}`;
}

/** A JSON response of a route, for the document. */
export function json(description: string, schema: ZodType) {
  return { description, content: { "application/json": { schema } } };
}

/**
 * An app for a door's routes; mounted with app.route(), its routes join /openapi.json. `describe`
 * words a validation failure (by default every issue with its path; a protocol may want its own text).
 */
export function declaredDoor(describe: (error: ZodError, target: string) => string = describeIssues): OpenAPIHono<GatewayEnv> {
  return new OpenAPIHono<GatewayEnv>({
    defaultHook: (result) => {
      if (!result.success) throw new ValidationError(describe(result.error as ZodError, result.target));
    },
  });
}
