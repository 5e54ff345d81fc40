import { randomUUID } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { type Logger, pino } from "pino";
import pretty from "pino-pretty";
import type { GatewayEnv } from "./errors.js";

export type { Logger } from "pino";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const guarded = new WeakSet<NodeJS.WritableStream>();

/** A reader that went away (`switchyard serve | head`) must not take the gateway down with it. */
function survivePipeClosing(destination: NodeJS.WritableStream): void {
  if (guarded.has(destination)) return;
  guarded.add(destination);
  destination.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
  });
}

/** JSON lines on stdout, or readable lines when stdout is a terminal. */
export function createLogger(level: LogLevel, destination: NodeJS.WritableStream = process.stdout): Logger {
  const terminal = (destination as NodeJS.WriteStream).isTTY === true;
  survivePipeClosing(destination);
  return pino({ level, base: undefined }, terminal ? pretty({ destination, colorize: true }) : destination);
}

/** A caller's X-Request-Id is kept when it is a plain token; anything else gets a fresh one. */
const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * The door a path belongs to, for the log line. At the root the Cloudq door may own `/:queue` and
 * `/:queue/:id`, and the glide-mq door `/queues/...`, `/flows/...`: a deeper path is glide-mq's.
 */
export function doorOf(path: string): string {
  const segments = path.split("/");
  const first = segments[1] ?? "";
  if (first === "v1") return "native";
  if (["qless", "workerqueue", "cloudq", "glidemq"].includes(first)) return first;
  if (["queues", "flows", "usage", "broadcast"].includes(first) && segments.length > 3) return "glidemq";
  if (["health", "metrics", "docs", "openapi.json", "dashboard"].includes(first)) return first;
  return "cloudq";
}

/**
 * One log line per request: its id (also answered in X-Request-Id), door, method, route, queue, the
 * name of its token (never the token), status and duration. Never a body, a query value or a header: job data and credentials stay out.
 */
export function requestLog(logger: Logger): MiddlewareHandler<GatewayEnv> {
  return async (c, next) => {
    const given = c.req.header("x-request-id");
    const requestId = given && REQUEST_ID.test(given) ? given : randomUUID();
    c.set("requestId", requestId);
    c.header("X-Request-Id", requestId);
    const started = performance.now();
    await next();
    // The line is built only when it is written: at the default level (warn) it never is.
    if (!logger.isLevelEnabled("info")) return;
    const queue = c.req.param("queue");
    const token = c.get("principal")?.name;
    logger.info(
      {
        requestId,
        door: doorOf(c.req.path),
        method: c.req.method,
        route: c.req.routePath,
        ...(queue ? { queue } : {}),
        ...(token ? { token } : {}),
        status: c.res.status,
        durationMs: Math.round((performance.now() - started) * 10) / 10,
      },
      "request",
    );
  };
}
