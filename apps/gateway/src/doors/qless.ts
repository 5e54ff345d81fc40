import { z } from "@hono/zod-openapi";
import { type Backend, type QlessCommands, QueueNameSchema, ValidationError, hasQlessCommands } from "@switchyard/core";
import { type Access, requireAccess } from "../auth.js";
import type { NamedBackend } from "../backends.js";
import { onQlessClock } from "../caller-clock.js";
import { errorFormat, limitBody } from "../http.js";
import type { QueueRouter } from "../router.js";
import { BACKEND_ERRORS, body, declaredDoor, errors, guarded, json } from "./declare.js";
import type { Door } from "./door.js";
import { Json } from "./native-schemas.js";
import { RECUR_JID_COMMANDS } from "./qless-recurring.js";
import { QLESS_CONFIG_COMMANDS } from "./qless-settings.js";
import { type QlessArgs, runTranslated } from "./qless-translate.js";

/**
 * Arguments that no store would keep as they were sent are refused before any script runs: a lone
 * UTF-16 surrogate has no UTF-8 form (Redis would get U+FFFD, so a jid or worker would change on the
 * way in), and NUL is refused in names and ids on every other door. qless's own rules do the rest.
 */
function storableArgs(args: Array<string | number>, ctx: z.RefinementCtx): void {
  args.forEach((arg, index) => {
    if (typeof arg !== "string") return;
    if (/\p{Cs}/u.test(arg))
      ctx.addIssue({ code: "custom", path: [index], message: "must be valid Unicode text (it holds a lone UTF-16 surrogate)" });
    if (arg.includes("\u0000")) ctx.addIssue({ code: "custom", path: [index], message: "must not contain NUL characters" });
  });
}

/** `POST /qless/:command` body: the args a qless client passes after `now`, and optionally `now` and a queue. */
const QlessBody = z
  .object({
    args: z
      .array(z.union([z.string(), z.number()]))
      .superRefine(storableArgs)
      .default([])
      .describe("The arguments a qless client passes to the script after `now`."),
    now: z
      .union([z.number(), z.string()])
      .optional()
      .describe(
        "Float epoch seconds; the gateway's clock when absent. The command's time on every store (unless `doors.qless.clock` is `store`).",
      ),
    queue: QueueNameSchema.optional().describe(
      "For commands that take only jids or nothing: a queue routed to the backend that runs them.",
    ),
  })
  .openapi("QlessRequest");

/** qless-core's API (qless.lua's dispatch table); anything else is refused before it reaches a store. */
export const QLESS_COMMANDS = [
  "cancel",
  "complete",
  "config.get",
  "config.set",
  "config.unset",
  "depends",
  "fail",
  "failed",
  "get",
  "heartbeat",
  "jobs",
  "length",
  "log",
  "multiget",
  "pause",
  "peek",
  "pop",
  "priority",
  "put",
  "queue.forget",
  "queues",
  "recur",
  "recur.get",
  "recur.tag",
  "recur.untag",
  "recur.update",
  "requeue",
  "retry",
  "stats",
  "tag",
  "timeout",
  "track",
  "unfail",
  "unpause",
  "unrecur",
  "worker.deregister",
  "workers",
] as const;

const QlessCommandParams = z.object({
  command: z.enum(QLESS_COMMANDS, { message: "Unknown command: not one of qless-core's" }).describe("A qless-core command."),
});

const QlessReply = z.object({ reply: Json.nullable().describe("The script's reply; JSON-text replies parsed.") }).openapi("QlessReply");

/** Commands that only read; `tag get`/`tag top` read too. */
const READ_COMMANDS = new Set([
  "get",
  "multiget",
  "peek",
  "jobs",
  "length",
  "queues",
  "stats",
  "failed",
  "workers",
  "config.get",
  "recur.get",
]);
/** Commands that stop, remove or reconfigure rather than run jobs. */
const ADMIN_COMMANDS = new Set([
  "pause",
  "unpause",
  "queue.forget",
  "cancel",
  "config.set",
  "config.unset",
  "worker.deregister",
  "unfail",
  "timeout",
  "unrecur",
]);

/** The token access a qless command needs: read, write (what producers and workers do) or admin. */
export function accessOf(command: string, args: QlessArgs): Access {
  if (READ_COMMANDS.has(command) || (command === "tag" && (args[0] === "get" || args[0] === "top"))) return "read";
  // `track` alone lists the tracked jobs; `track track|untrack <jid>` marks one.
  if (command === "track" && args.length === 0) return "read";
  return ADMIN_COMMANDS.has(command) ? "admin" : "write";
}

/** Where each queue-naming command has its queue among the args after `now`. */
const QUEUE_ARG: Record<string, number> = {
  put: 1,
  requeue: 1,
  retry: 1,
  pop: 0,
  peek: 0,
  length: 0,
  recur: 0,
  stats: 0,
  unfail: 0,
  queues: 0,
};
/** Commands whose every argument is a queue. */
const QUEUE_LIST_COMMANDS = new Set(["pause", "unpause", "queue.forget"]);

/** Commands whose string reply is JSON text (job documents, listings, counts). */
const JSON_REPLIES = new Set([
  "get",
  "multiget",
  "peek",
  "pop",
  "tag",
  "track",
  "failed",
  "queues",
  "workers",
  "stats",
  "recur.get",
  "recur.tag",
  "recur.untag",
]);

export function queuesNamed(command: string, args: QlessArgs): string[] {
  const named = (value: string | number | undefined) => (value === undefined || value === "" ? [] : [String(value)]);
  if (QUEUE_LIST_COMMANDS.has(command)) return args.flatMap(named);
  // `jobs complete [offset count]` is global; `jobs <state> <queue> ...` names the queue.
  if (command === "jobs") return args[0] === "complete" ? [] : named(args[1]);
  // `complete ... next <queue>` moves the job on: the next queue must live on the same backend.
  if (command === "complete") {
    const next = args.findIndex((arg, i) => i >= 4 && i % 2 === 0 && arg === "next");
    return [...named(args[2]), ...(next >= 0 ? named(args[next + 1]) : [])];
  }
  return Object.hasOwn(QUEUE_ARG, command) ? named(args[QUEUE_ARG[command]!]) : [];
}

/** Parses JSON-text replies so the client gets JSON; integers, nil (null) and multi-bulk lists stay as they are. */
export function shapeReply(command: string, args: QlessArgs, reply: unknown): unknown {
  if (typeof reply !== "string") return reply;
  return isJsonReply(command, args) ? JSON.parse(reply) : reply;
}

/** Whether qless's script answers `command` with JSON text (a document or a list) rather than a bare value. */
export function isJsonReply(command: string, args: QlessArgs): boolean {
  return JSON_REPLIES.has(command) || (command === "config.get" && args.length === 0);
}

/**
 * Commands that name no queue and no job when they ask about a whole store (`track` lists the
 * tracked jobs, or finds its jid in any queue; a recurring job's jid is the store's, not a queue's);
 * `pause`, `unpause` and `worker.deregister` given nothing reach it too, to be refused in qless's words.
 */
const STORE_WIDE_COMMANDS = new Set([
  "queues",
  "tag",
  "jobs",
  "workers",
  "failed",
  "track",
  "worker.deregister",
  "pause",
  "unpause",
  ...RECUR_JID_COMMANDS,
]);

const isConfigCommand = (command: string) => (QLESS_CONFIG_COMMANDS as readonly string[]).includes(command);

function asQless(backend: Backend): QlessCommands | undefined {
  return hasQlessCommands(backend) ? backend : undefined;
}

export type Target = { qless: QlessCommands } | { backend: Backend; queue: string } | { settings: true };

/**
 * Picks where a command runs: the backend of the queue it names (all named queues must share
 * one), else the body's `queue`, else the only qless-redis backend of the config. qless's settings
 * (`config.*`) live in a qless store when they reach one, else with the gateway (qless-settings.ts).
 */
export function resolveTarget(
  router: QueueRouter,
  backends: Map<string, NamedBackend>,
  command: string,
  args: QlessArgs,
  bodyQueue?: string,
): Target {
  const named = queuesNamed(command, args);
  const queue = named[0] ?? bodyQueue;
  if (queue !== undefined) {
    const target = router.resolve(queue);
    const other = named.find((name) => router.resolve(name) !== target);
    if (other !== undefined) {
      throw new ValidationError(`qless ${command}: queues ${queue} and ${other} live on different backends; send one command per backend`);
    }
    const qless = asQless(target.backend);
    if (qless) return { qless };
    return isConfigCommand(command) ? { settings: true } : { backend: target.backend, queue };
  }
  const qlessBackends = [...backends.values()].filter((entry) => asQless(entry.backend));
  const only = qlessBackends.length === 1 ? asQless(qlessBackends[0]!.backend) : undefined;
  if (only) return { qless: only };
  if (qlessBackends.length === 0 && isConfigCommand(command)) return { settings: true };
  // A command about every queue of a store, on a gateway of one store: that store, all its queues.
  const [single] = backends.size === 1 ? backends.values() : [];
  if (single && qlessBackends.length === 0 && STORE_WIDE_COMMANDS.has(command)) return { backend: single.backend, queue: "" };
  const configured =
    qlessBackends.length === 0
      ? "no qless-redis backend is configured"
      : `${qlessBackends.length} qless-redis backends are configured (${qlessBackends.map((entry) => entry.name).join(", ")})`;
  throw new ValidationError(
    `qless ${command} names no queue and ${configured}: send "queue" in the body naming a queue routed to the backend that holds the job`,
  );
}

/**
 * The qless door: `POST /qless/:command` with `{args, now?, queue?}` answers `{reply}`. On a
 * qless-redis backend the command runs verbatim on its qless script; on any other backend it is
 * translated onto the Backend contract (qless-translate.ts), and what the store cannot do answers 501.
 */
export const qlessDoor: Door = {
  name: "qless",
  mount(app, { router, backends, qlessSettings, config }) {
    const door = declaredDoor();
    door.use("*", errorFormat("native"), limitBody);
    const request = body(QlessBody, true);
    door.openapi(
      guarded("qless", "read", {
        method: "post",
        path: "/{command}",
        summary: "Run one qless command with the arguments a qless client passes after `now`",
        middleware: request.middleware,
        request: { params: QlessCommandParams, body: request.body },
        responses: {
          200: json("The command's reply, shaped as qless's script gives it", QlessReply),
          ...errors(...BACKEND_ERRORS, 409, 413),
        },
      }),
      async (c) => {
        const { command } = c.req.valid("param");
        const { args, now, queue } = c.req.valid("json");
        const access = accessOf(command, args);
        requireAccess(c, "qless", access);
        for (const named of [...queuesNamed(command, args), ...(queue ? [queue] : [])]) requireAccess(c, "qless", access, named);
        const target = resolveTarget(router, backends, command, args, queue);
        const reply =
          "settings" in target
            ? qlessSettings.run(command, args)
            : "qless" in target
              ? shapeReply(command, args, await target.qless.qless(command, now ?? Date.now() / 1000, ...args))
              : await onQlessClock(config.doors.qless.clock, now, () =>
                  runTranslated(target.backend, target.queue, command, args, qlessSettings, {
                    mayMoveFrom: (from) => requireAccess(c, "qless", access, from),
                    mayReach: (reached) => requireAccess(c, "qless", access, reached),
                  }),
                );
        return c.json({ reply: reply as never }, 200);
      },
    );
    app.route("/qless", door);
  },
};
