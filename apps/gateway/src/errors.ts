import { type ErrorCode, isSwitchyardError } from "@switchyard/core";
import type { Context, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";

/** How a door shapes its error bodies; a door sets it on the context before its handlers run. */
export type ErrorFormat = "native" | "cloudq";

export type GatewayEnv = { Variables: { errorFormat: ErrorFormat } };

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
}

function describe(error: unknown): HttpFailure {
  if (isSwitchyardError(error)) return { status: STATUS_BY_CODE[error.code], code: error.code, message: error.message };
  if (error instanceof HTTPException) {
    const status = error.status as ContentfulStatusCode;
    return { status, code: CODE_BY_HTTP_STATUS[status] ?? "HTTP_ERROR", message: error.message || `HTTP ${status}` };
  }
  return { status: 500, code: "INTERNAL", message: "internal error" };
}

/** Renders a failure in the door's own shape: `{error:{code,message}}` or Cloudq's `{status:"error",message}`. */
export function errorResponse(c: Context<GatewayEnv>, failure: HttpFailure): Response {
  if (c.get("errorFormat") === "cloudq") return c.json({ status: "error", message: failure.message }, failure.status);
  return c.json({ error: { code: failure.code, message: failure.message } }, failure.status);
}

export function installErrorHandling(app: Hono<GatewayEnv>): void {
  app.onError((error, c) => {
    const failure = describe(error);
    // A 500 means a bug or an adapter failing in an untyped way: keep the details in the log, not the reply.
    if (failure.status >= 500 && failure.code === "INTERNAL") console.error(`[switchyard] ${c.req.method} ${c.req.path} failed:`, error);
    return errorResponse(c, failure);
  });
  app.notFound((c) => errorResponse(c, { status: 404, code: "NOT_FOUND", message: `no route for ${c.req.method} ${c.req.path}` }));
}
