import { type ErrorCode, QlessCommandError, isSwitchyardError } from "@switchyard/core";
import type { Context, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Logger } from "pino";
import { AuthError, type Principal } from "./auth.js";

/** How a door shapes its error bodies; a door sets it on the context before its handlers run. */
export type ErrorFormat = "native" | "cloudq" | "glidemq";

export type GatewayEnv = {
  Variables: { errorFormat: ErrorFormat; requestId: string; authEnabled: boolean; principal: Principal | null; rateCounted: boolean };
};

/** The one place typed core errors become HTTP statuses. */
export const STATUS_BY_CODE: Record<ErrorCode, ContentfulStatusCode> = {
  VALIDATION: 400,
  NOT_FOUND: 404,
  LEASE_LOST: 409,
  CONFLICT: 409,
  INVALID_STATE: 409,
  UNSUPPORTED: 501,
  BACKEND_UNAVAILABLE: 503,
};

/** Codes for failures that come from HTTP itself rather than from a core operation. */
const CODE_BY_HTTP_STATUS: Partial<Record<number, string>> = {
  400: "VALIDATION",
  401: "UNAUTHORIZED",
  404: "NOT_FOUND",
  405: "METHOD_NOT_ALLOWED",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
};

interface HttpFailure {
  status: ContentfulStatusCode;
  code: string;
  message: string;
  /** For 429: when the client may try again. */
  retryAfterSeconds?: number | undefined;
}

function describe(error: unknown): HttpFailure {
  if (isSwitchyardError(error)) return { status: STATUS_BY_CODE[error.code], code: error.code, message: error.message };
  if (error instanceof AuthError) {
    const code = error.status === 401 ? "UNAUTHORIZED" : error.status === 403 ? "FORBIDDEN" : "RATE_LIMITED";
    return { status: error.status, code, message: error.message, retryAfterSeconds: error.retryAfterSeconds };
  }
  // qless's own refusal (a bad argument, a job given to another worker), with qless's message.
  if (error instanceof QlessCommandError) return { status: 400, code: "QLESS_ERROR", message: error.message };
  if (error instanceof HTTPException) {
    const status = error.status as ContentfulStatusCode;
    return { status, code: CODE_BY_HTTP_STATUS[status] ?? "HTTP_ERROR", message: error.message || `HTTP ${status}` };
  }
  return { status: 500, code: "INTERNAL", message: "internal error" };
}

/** When a client may try again after a 503: stores come back, and the gateway tries them afresh on every call. */
const RETRY_AFTER_SECONDS = "1";

/** Renders a failure in the door's own shape: `{error:{code,message}}`, Cloudq's `{status:"error",message}` or glide-mq's `{error}`. */
export function errorResponse(c: Context<GatewayEnv>, failure: HttpFailure): Response {
  if (failure.status === 503) c.header("Retry-After", RETRY_AFTER_SECONDS);
  if (failure.status === 429) c.header("Retry-After", String(failure.retryAfterSeconds ?? 1));
  // Cloudq clients speak basic auth (the token as the password); every other door takes a bearer token.
  if (failure.status === 401)
    c.header("WWW-Authenticate", c.get("errorFormat") === "cloudq" ? 'Basic realm="switchyard"' : 'Bearer realm="switchyard"');
  if (c.get("errorFormat") === "cloudq") return c.json({ status: "error", message: failure.message }, failure.status);
  if (c.get("errorFormat") === "glidemq") return c.json({ error: failure.message }, failure.status);
  return c.json({ error: { code: failure.code, message: failure.message } }, failure.status);
}

export function installErrorHandling(app: Hono<GatewayEnv>, logger: Logger): void {
  app.onError((error, c) => {
    const failure = describe(error);
    // A 500 means a bug or an adapter failing in an untyped way: keep the details in the log, not the reply.
    if (failure.status >= 500 && failure.code === "INTERNAL") {
      logger.error({ err: error, requestId: c.get("requestId"), method: c.req.method, route: c.req.routePath }, "request failed");
    }
    return errorResponse(c, failure);
  });
  app.notFound((c) => {
    const allowed = allowedMethods(app, c.req.path);
    // A handler that found nothing for its own method (an unknown asset) answers 404 too.
    if (allowed.length === 0 || allowed.includes(c.req.method))
      return errorResponse(c, { status: 404, code: "NOT_FOUND", message: `no route for ${c.req.method} ${c.req.path}` });
    c.header("Allow", allowed.join(", "));
    const message = `${c.req.method} is not allowed on ${c.req.path}; it answers ${allowed.join(", ")}`;
    return errorResponse(c, { status: 405, code: "METHOD_NOT_ALLOWED", message });
  });
}

const patterns = new Map<string, RegExp>();

/** A route path in Hono's syntax (`/v1/queues/:queue/jobs`, `*`) as a regular expression over request paths. */
function pathPattern(path: string): RegExp {
  let pattern = patterns.get(path);
  if (!pattern) {
    const source = path
      .split("/")
      .map((segment) => (segment.startsWith(":") ? "[^/]+" : segment === "*" ? ".*" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
      .join("/");
    pattern = new RegExp(`^${source}/?$`);
    patterns.set(path, pattern);
  }
  return pattern;
}

/** The methods routes answer on a path that had no route for the request's method: a 405 rather than a 404. */
function allowedMethods(app: Hono<GatewayEnv>, path: string): string[] {
  const methods = new Set<string>();
  for (const route of app.routes) if (route.method !== "ALL" && pathPattern(route.path).test(path)) methods.add(route.method);
  if (methods.has("GET")) methods.add("HEAD");
  return [...methods].sort();
}
