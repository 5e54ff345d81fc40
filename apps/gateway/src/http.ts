import { ValidationError } from "@switchyard/core";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import type { ErrorFormat, GatewayEnv } from "./errors.js";

/** Request bodies above this are refused with 413 before any of them is parsed. */
export const MAX_BODY_BYTES = 1024 * 1024;

export const limitBody: MiddlewareHandler<GatewayEnv> = bodyLimit({
  maxSize: MAX_BODY_BYTES,
  onError: () => {
    throw new HTTPException(413, { message: `request body is larger than the ${MAX_BODY_BYTES} byte (1 MiB) limit` });
  },
});

/** Marks the routes of a door so the one error handler answers in that door's shape. */
export function errorFormat(format: ErrorFormat): MiddlewareHandler<GatewayEnv> {
  return async (c, next) => {
    c.set("errorFormat", format);
    await next();
  };
}

/**
 * Reads a JSON body whatever the content type says (curl -d sends form-encoded headers with JSON
 * bodies). An empty body is `undefined` when allowed, a ValidationError otherwise.
 */
export async function readJson(c: Context<GatewayEnv>, options: { optional?: boolean } = {}): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "") {
    if (options.optional) return undefined;
    throw new ValidationError("request body is empty; a JSON body is required");
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ValidationError(`request body is not valid JSON: ${(error as Error).message}`);
  }
}
