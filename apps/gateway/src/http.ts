import { IncomingMessage, ServerResponse } from "node:http";
import { ValidationError } from "@switchyard/core";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import type { ErrorFormat, GatewayEnv } from "./errors.js";

/** Deeper JSON is refused: validating it recursively would exhaust the stack (a 500 for bad input). */
export const MAX_JSON_DEPTH = 100;

/** Request bodies above this are refused with 413 before any of them is parsed. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** Node's request under @hono/node-server (`switchyard serve`); null under `app.request()`. */
function incomingOf(c: Context<GatewayEnv>): IncomingMessage | null {
  const incoming = (c.env as { incoming?: unknown } | undefined)?.incoming;
  return incoming instanceof IncomingMessage ? incoming : null;
}

/**
 * Aborts when the client goes away before its answer is written, as `c.req.raw.signal` does; made
 * from Node's own response where there is one, since asking @hono/node-server for the web Request's
 * signal builds that whole Request (about 70 µs, a quarter of the gateway's work per job over HTTP
 * reserve + complete on glide-mq).
 */
export function clientGone(c: Context<GatewayEnv>): AbortSignal {
  const outgoing = (c.env as { outgoing?: unknown } | undefined)?.outgoing;
  if (!(outgoing instanceof ServerResponse)) return c.req.raw.signal;
  const controller = new AbortController();
  outgoing.once("close", () => {
    if (!outgoing.writableFinished) controller.abort(new Error("Client connection prematurely closed."));
  });
  return controller.signal;
}

const tooLarge = () => {
  throw new HTTPException(413, { message: `request body is larger than the ${MAX_BODY_BYTES} byte (1 MiB) limit` });
};
const countingLimit = bodyLimit({ maxSize: MAX_BODY_BYTES, onError: tooLarge });

/**
 * Hono's bodyLimit, deciding as it does: by Content-Length when there is one (and no
 * Transfer-Encoding), else by counting the bytes. It is asked only then: it looks at `c.req.raw.body`
 * first, which makes @hono/node-server build the whole web Request even when the header decides.
 */
export const limitBody: MiddlewareHandler<GatewayEnv> = async (c, next) => {
  if (!incomingOf(c)) return countingLimit(c, next);
  // Node's server gives a GET or HEAD request no body, and bodyLimit lets a request without one through.
  if (c.req.method === "GET" || c.req.method === "HEAD") return next();
  const length = c.req.header("content-length");
  if (length === undefined || c.req.header("transfer-encoding") !== undefined) return countingLimit(c, next);
  return Number.parseInt(length || "0", 10) > MAX_BODY_BYTES ? tooLarge() : next();
};

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
  const text = await bodyText(c);
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

/**
 * The body as `c.req.text()` gives it, cached where it caches it. Under @hono/node-server a body no
 * one has read yet is read from Node's request stream: building the web Request and its stream to read
 * a small JSON body costs more than the rest of the gateway's own work on an enqueue. Decoded as
 * `Request.text()` decodes (UTF-8, invalid bytes as U+FFFD, one leading byte order mark dropped).
 */
function bodyText(c: Context<GatewayEnv>): Promise<string> {
  const incoming = incomingOf(c);
  const cache = c.req.bodyCache as { text?: Promise<string> };
  if (!incoming || Object.keys(cache).length > 0 || incoming.readableDidRead || incoming.readableEnded) return c.req.text();
  cache.text = new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.once("error", reject);
    incoming.once("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      resolve(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    });
    incoming.once("close", () => {
      if (!incoming.readableEnded) reject(new Error("the client closed the connection before the request body ended"));
    });
  });
  return cache.text;
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
