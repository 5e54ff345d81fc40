import { ValidationError } from "@switchyard/core";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import type { ErrorFormat, GatewayEnv } from "./errors.js";

/** Deeper JSON is refused: validating it recursively would exhaust the stack (a 500 for bad input). */
export const MAX_JSON_DEPTH = 100;

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
export async function readJson(c: Context<GatewayEnv>, options: { optional?: boolean; malformed?: string } = {}): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "") {
    if (options.optional) return undefined;
    throw new ValidationError("request body is empty; a JSON body is required");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ValidationError(options.malformed ?? `request body is not valid JSON: ${(error as Error).message}`);
  }
  if (depthOf(value) > MAX_JSON_DEPTH) throw new ValidationError(`request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
  return value;
}

/** Nesting depth of parsed JSON, measured without recursion so a hostile body cannot overflow the stack here either. */
function depthOf(root: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[root, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (typeof value !== "object" || value === null) continue;
    deepest = Math.max(deepest, depth);
    if (deepest > MAX_JSON_DEPTH) return deepest;
    for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
  return deepest;
}
