import { QlessCommandError, hasQlessCommands, hasRecurringJobs, isSwitchyardError, queuesToSearch, setNewest } from "@switchyard/core";
import { AuthError } from "../auth.js";
import type { NamedBackend } from "../backends.js";
import { type QlessClock, onQlessClock } from "../caller-clock.js";
import { checkJobArgs, luaNumber } from "../doors/qless-args.js";
import { forgotten, refuseLoneParents } from "../doors/qless-jobs.js";
import { RECUR_JID_COMMANDS, recurringHolder } from "../doors/qless-recurring.js";
import type { QlessSettings } from "../doors/qless-settings.js";
import { type QlessArgs, runTranslated } from "../doors/qless-translate.js";
import { QLESS_COMMANDS, accessOf, isJsonReply, queuesNamed, resolveTarget } from "../doors/qless.js";
import type { QueueRouter } from "../router.js";
import { RespError, type RespValue } from "./protocol.js";

/**
 * qless over RESP: a qless client (qless-py, qless-ruby) loads qless-core's script and calls it with
 * `EVALSHA <sha> 0 <command> <now> <args...>`. The door never runs the script: it recognises it and
 * sends each command where the qless door would (doors/qless.ts), verbatim to a qless-redis store, or
 * translated onto any other backend (qless-translate.ts), with the reply shaped as the script shapes
 * it: JSON text for documents and lists, bare strings and integers otherwise.
 */

/**
 * qless-core's script (any version) or Switchyard's own: recognised by what it does, not by its text
 * or sha, since every client ships its own copy. Each defines the core commands and keeps `ql:` keys.
 */
export function isQlessScript(source: string): boolean {
  return (
    source.length > 10_000 &&
    source.includes("ql:") &&
    ["put", "pop", "heartbeat", "complete", "fail"].every((command) => new RegExp(`['".]${command}\\b`).test(source))
  );
}

/** How a loaded copy of the script takes its arguments. */
export interface QlessDialect {
  /**
   * qless-core before its `put` took a worker (the copy qless-py 0.11.4 ships): `put queue jid ...`
   * rather than `put worker queue jid ...`. Every other command is the same in both.
   */
  putWithoutWorker: boolean;
}

export function qlessDialectOf(source: string): QlessDialect {
  return { putWithoutWorker: /\.put\s*=\s*function\s*\(\s*now\s*,\s*queue\b/.test(source) };
}

/** What the qless commands need from the gateway, and who is asking. */
export interface QlessCallContext {
  router: QueueRouter;
  backends: Map<string, NamedBackend>;
  jids: JidQueues;
  qlessSettings: QlessSettings;
  /** Whether translated commands run at the client's `now` (`caller`, the default) or the store's clock. */
  qlessClock?: QlessClock;
  /** Throws AuthError when the connection's token may not run a command of this access on `queue`. */
  authorize(access: ReturnType<typeof accessOf>, queue?: string): void;
}

/** Commands whose first arguments are not a jid: a worker (`workers`), a failure group, a queue, a setting. */
const NAME_NO_JOB = new Set([
  "workers",
  "worker.deregister",
  "failed",
  "queues",
  "queue.forget",
  "pause",
  "unpause",
  "config.get",
  "config.set",
  "config.unset",
]);

/** Where the jid sits among a command's args, for commands that name a job and no queue. */
function jidOf(command: string, args: QlessArgs): string | undefined {
  if (NAME_NO_JOB.has(command) || (command === "jobs" && args[0] === "complete")) return undefined;
  const at = command === "tag" || command === "track" ? 1 : 0;
  const value = args[at];
  return value === undefined || value === "" ? undefined : String(value);
}

/** The commands whose first act in qless.lua is `Qless.job(jid)`, which asserts the jid is given. */
const JOB_FIRST = new Set(["get", "complete", "fail", "retry", "depends", "heartbeat", "priority"]);

const REMEMBERED_JIDS = 100_000;

/**
 * The queue of each jid this door has seen (put, popped, peeked, read): qless commands such as
 * heartbeat and complete name only the jid, and a backend other than qless-redis needs the queue.
 * A jid not seen is looked for in every queue of the backends (slow, but only once).
 */
export class JidQueues {
  readonly #queues = new Map<string, string>();

  constructor(private readonly backends: Map<string, NamedBackend>) {}

  remember(jid: string, queue: string): void {
    setNewest(this.#queues, jid, queue, REMEMBERED_JIDS);
  }

  /** Notes the jids and queues of a reply that lists jobs (pop, peek, get, multiget). */
  rememberReply(reply: RespValue): void {
    if (typeof reply !== "string" || (!reply.startsWith("[") && !reply.startsWith("{"))) return;
    const parsed = JSON.parse(reply) as unknown;
    for (const job of Array.isArray(parsed) ? parsed : [parsed])
      if (job && typeof job === "object" && typeof job.jid === "string" && typeof job.queue === "string") this.remember(job.jid, job.queue);
  }

  async queueOf(jid: string): Promise<string | undefined> {
    const known = this.#queues.get(jid);
    if (known !== undefined) return known;
    // A canceled job (as one a put moved to another queue leaves behind) is qless's deleted one:
    // its queue answers only when no queue holds the jid alive.
    let canceledIn: string | undefined;
    for (const { backend } of this.backends.values())
      for (const queue of await queuesToSearch(backend, jid)) {
        const job = await backend.get(queue, jid);
        if (job && !forgotten(job)) {
          this.remember(jid, queue);
          return queue;
        }
        if (job) canceledIn ??= queue;
      }
    return canceledIn;
  }
}

/** What qless's script raises for a command about a job it does not hold (job.lua, api.lua, base.lua). */
const MISSING_JOB: Record<string, (jid: string) => string> = {
  complete: (jid) => `Complete(): Job ${jid} does not exist`,
  // qless's own message has no space before "does".
  fail: (jid) => `Fail(): Job ${jid}does not exist`,
  retry: (jid) => `Retry(): Job ${jid} does not exist`,
  heartbeat: (jid) => `Heartbeat(): Job ${jid} does not exist`,
  priority: (jid) => `Priority(): Job ${jid} does not exist`,
  timeout: (jid) => `Timeout(): Job ${jid} does not exist`,
  log: (jid) => `Log(): Job ${jid} does not exist`,
  requeue: (jid) => `Requeue(): Job ${jid} does not exist`,
  tag: (jid) => `Tag(): Job ${jid} does not exist`,
  track: () => "Track(): Job does not exist",
  depends: (jid) => `Depends(): Job ${jid} not in the depends state: false`,
};

function missingJob(command: string, args: QlessArgs, jid: string): QlessCommandError | undefined {
  // `tag get <tag>` and `track` without a jid name no job; the rest of `tag`/`track` do.
  if ((command === "tag" && !["add", "remove"].includes(String(args[0]))) || (command === "track" && args.length < 2)) return undefined;
  const message = Object.hasOwn(MISSING_JOB, command) ? MISSING_JOB[command]?.(jid) : undefined;
  return message === undefined ? undefined : new QlessCommandError(command, message);
}

const hasQlessStore = (context: QlessCallContext) => [...context.backends.values()].some(({ backend }) => hasQlessCommands(backend));

/** JSON text as Lua's cjson writes it: an empty list is `{}` (cjson cannot tell an empty table from an object). */
const cjsonText = (value: unknown) => JSON.stringify(value, (_key, item) => (Array.isArray(item) && item.length === 0 ? {} : item));

/** A reply of the translated commands, back in the script's shape. */
function asScriptReply(command: string, args: QlessArgs, value: unknown): RespValue {
  if (value === undefined || value === null) return null;
  if (isJsonReply(command, args) || (typeof value === "object" && !Array.isArray(value))) return cjsonText(value);
  if (Array.isArray(value)) return value.map((item) => asScriptReply("", [], item));
  return value as RespValue;
}

/** Redis's words for an error a script raised, with qless's message in them (qless clients show it). */
function scriptError(error: unknown): RespError {
  if (error instanceof AuthError) return new RespError(`NOPERM ${error.message}`);
  if (error instanceof QlessCommandError) return new RespError(`ERR ${error.message}`);
  if (isSwitchyardError(error)) return new RespError(`ERR ${error.code}: ${error.message}`);
  return new RespError(`ERR ${(error as Error).message}`);
}

/**
 * Runs `command` on each jid where a store holds it (found as for any jid; qless's jids are global, so
 * they may be in different queues), skipping those no store holds; the translated replies, in order.
 */
async function onEachHeldJid(
  context: QlessCallContext,
  access: ReturnType<typeof accessOf>,
  command: string,
  jids: string[],
  now: string | undefined,
): Promise<unknown[]> {
  const replies: unknown[] = [];
  for (const jid of jids) {
    const queue = await context.jids.queueOf(jid);
    if (queue === undefined) continue;
    context.authorize(access, queue);
    replies.push(
      await onQlessClock(context.qlessClock ?? "caller", now, () =>
        runTranslated(context.router.resolve(queue).backend, queue, command, [jid], context.qlessSettings),
      ),
    );
  }
  return replies;
}

/**
 * qless's `cancel jid...` off Redis: the jids a store holds, by queue (the others ignored as qless
 * ignores them), each queue's checked before any is canceled, as qless cancels all or nothing (a job
 * waits only for jobs of its own queue, so a queue's jids settle who waits for whom); the reply is
 * the jids given.
 */
async function cancelEach(
  context: QlessCallContext,
  access: ReturnType<typeof accessOf>,
  jids: string[],
  now: string | undefined,
): Promise<RespValue> {
  const byQueue = new Map<string, string[]>();
  for (const jid of jids) {
    const queue = await context.jids.queueOf(jid);
    if (queue === undefined) continue;
    context.authorize(access, queue);
    byQueue.set(queue, [...(byQueue.get(queue) ?? []), jid]);
  }
  for (const [queue, some] of byQueue) await refuseLoneParents(context.router.resolve(queue).backend, queue, some);
  for (const [queue, some] of byQueue)
    await onQlessClock(context.qlessClock ?? "caller", now, () =>
      runTranslated(context.router.resolve(queue).backend, queue, "cancel", some, context.qlessSettings),
    );
  return asScriptReply("cancel", jids, jids);
}

/** qless's `get jid` and `multiget jid...` off Redis: each jid read where a store holds it, the others left out (`get` answers nil). */
async function getEach(
  context: QlessCallContext,
  access: ReturnType<typeof accessOf>,
  command: "get" | "multiget",
  jids: string[],
  now: string | undefined,
): Promise<RespValue> {
  const jobs = (await onEachHeldJid(context, access, "get", jids, now)).filter((job) => job !== null);
  return command === "get" ? asScriptReply("get", jids, jobs[0] ?? null) : asScriptReply("multiget", jids, jobs);
}

/**
 * qless's `timeout jid...` off Redis: every jid found first (qless's words for the first one no store
 * holds, before anything changes), then the jids of each queue timed out on its store.
 */
async function timeoutEach(
  context: QlessCallContext,
  access: ReturnType<typeof accessOf>,
  jids: string[],
  now: string | undefined,
): Promise<RespValue> {
  const byQueue = new Map<string, string[]>();
  for (const jid of jids) {
    const queue = await context.jids.queueOf(jid);
    if (queue === undefined) throw missingJob("timeout", jids, jid);
    context.authorize(access, queue);
    byQueue.set(queue, [...(byQueue.get(queue) ?? []), jid]);
  }
  for (const [queue, some] of byQueue)
    await onQlessClock(context.qlessClock ?? "caller", now, () =>
      runTranslated(context.router.resolve(queue).backend, queue, "timeout", some, context.qlessSettings),
    );
  return null;
}

/**
 * A command about a recurring job by its jid off Redis: run on the store that holds the definition
 * (recurring jids are a store's, not a queue's), else on the first that keeps recurring jobs, whose
 * handler answers as qless does for a missing one.
 */
async function onRecurringHolder(
  context: QlessCallContext,
  access: ReturnType<typeof accessOf>,
  command: string,
  args: QlessArgs,
  now: string | undefined,
): Promise<RespValue> {
  const backends = [...context.backends.values()].map(({ backend }) => backend);
  // No store keeps recurring jobs: the first answers the command's UnsupportedError.
  const backend = (await recurringHolder(backends, String(args[0] ?? ""))) ?? backends[0];
  if (!backend) return new RespError(`ERR qless command ${command}: the gateway has no store`);
  const reply = await onQlessClock(context.qlessClock ?? "caller", now, () =>
    runTranslated(backend, "", command, args, context.qlessSettings, { mayReach: (queue) => context.authorize(access, queue) }),
  );
  return asScriptReply(command, args, reply);
}

/**
 * `ZSCORE ql:q:<queue>-recur <jid>`, the one key qless-py reads itself (a recurring job's `next`):
 * when the next instance is due, in seconds, from the store that keeps the queue's recurring jobs;
 * nil when it has no such job there. undefined for any other key (not qless's to answer).
 */
export async function qlessRecurScore(context: QlessCallContext, args: string[]): Promise<RespValue | undefined> {
  const [key, jid, ...more] = args;
  const queue = /^ql:q:(.+)-recur$/s.exec(key ?? "")?.[1];
  if (queue === undefined || jid === undefined || more.length > 0) return undefined;
  try {
    context.authorize("read", queue);
    const { backend } = context.router.resolve(queue);
    if (!hasRecurringJobs(backend)) return undefined;
    const recurrence = await backend.recurrence(jid);
    return recurrence?.queue === queue ? String(recurrence.nextAt / 1000) : null;
  } catch (error) {
    return scriptError(error);
  }
}

/** Runs one call of the script: `keys` must be empty, `argv` is `[command, now, ...args]`. */
export async function runQlessCall(context: QlessCallContext, dialect: QlessDialect, keys: string[], argv: string[]): Promise<RespValue> {
  try {
    if (keys.length > 0) return new RespError("ERR No Keys should be provided");
    const [command, now, ...given] = argv;
    // An older client's put is given the empty worker its script would have had.
    const args = command === "put" && dialect.putWithoutWorker ? ["", ...given] : given;
    if (command === undefined) return new RespError("ERR Must provide a command");
    if (!(QLESS_COMMANDS as readonly string[]).includes(command)) return new RespError(`ERR Unknown command ${command}`);
    const access = accessOf(command, args);
    context.authorize(access);
    for (const queue of queuesNamed(command, args)) context.authorize(access, queue);
    // qless.lua reads `now` with Lua's tonumber before anything else, and reports a bad one as nil.
    if (now === undefined) return new RespError("ERR bad argument #1 to 'tonumber' (value expected)");
    luaNumber(command, now, () => 'Arg "now" missing or not a number: nil');
    if (JOB_FIRST.has(command) && given.length === 0) return new RespError("ERR Job(): no jid provided");
    const named = queuesNamed(command, args);
    if (command === "cancel" && !hasQlessStore(context)) return await cancelEach(context, access, args.map(String), now);
    if ((command === "get" || command === "multiget") && args.length > 0 && !hasQlessStore(context))
      return await getEach(context, access, command, command === "get" ? [String(args[0])] : args.map(String), now);
    if (command === "timeout" && args.length > 1 && !hasQlessStore(context))
      return await timeoutEach(context, access, args.map(String), now);
    if (RECUR_JID_COMMANDS.has(command) && !hasQlessStore(context)) return await onRecurringHolder(context, access, command, args, now);
    // One qless-redis store needs no queue to run a jid's command; anything else is found by the jid's queue.
    const oneQlessStore = context.backends.size === 1 && [...context.backends.values()].every(({ backend }) => hasQlessCommands(backend));
    const jid = named.length === 0 && !oneQlessStore ? jidOf(command, args) : undefined;
    const jobQueue = jid === undefined ? undefined : await context.jids.queueOf(jid);
    if (jobQueue !== undefined) context.authorize(access, jobQueue);
    // No store holds the jid, and no qless store would answer for it: qless's own words for a missing job.
    const missing = jid !== undefined && jobQueue === undefined && !hasQlessStore(context) ? missingJob(command, args, jid) : undefined;
    if (missing) {
      // qless refuses the arguments before it finds the job missing (translated commands check them in runTranslated).
      checkJobArgs(command, args);
      throw missing;
    }
    const target = resolveTarget(context.router, context.backends, command, args, jobQueue);
    const reply =
      "settings" in target
        ? asScriptReply(command, args, context.qlessSettings.run(command, args))
        : "qless" in target
          ? ((await target.qless.qless(command, now ?? Date.now() / 1000, ...args)) as RespValue)
          : asScriptReply(
              command,
              args,
              await onQlessClock(context.qlessClock ?? "caller", now, () =>
                // A job a put, requeue or unfail moved to another queue is found there next time.
                runTranslated(target.backend, target.queue, command, args, context.qlessSettings, {
                  moved: (moved, queue) => context.jids.remember(moved, queue),
                  mayMoveFrom: (from) => context.authorize(access, from),
                  mayReach: (queue) => context.authorize(access, queue),
                }),
              ),
            );
    if (command === "put" && typeof reply === "string" && named[0] !== undefined) context.jids.remember(reply, named[0]);
    if (["pop", "peek", "get", "multiget"].includes(command)) context.jids.rememberReply(reply);
    return reply;
  } catch (error) {
    return scriptError(error);
  }
}
