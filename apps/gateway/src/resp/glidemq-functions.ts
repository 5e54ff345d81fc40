import type { Backend, EnqueueInput, Json } from "@switchyard/core";
import type { Access } from "../auth.js";
import type { NamedBackend } from "../backends.js";
import { corePriority } from "../doors/glidemq-jobs.js";
import type { QueueRouter } from "../router.js";
import type { Wakeups } from "../wakeups.js";
import { PASSED_KEY_COMMANDS, isGlideStore } from "./glidemq-passthrough.js";
import {
  type GlideCallContext,
  type GlideKey,
  WorkerLocks,
  entryIdFor,
  flat,
  glideHash,
  jobIdOf,
  parseGlideKey,
} from "./glidemq-shapes.js";
import { GlideMqKeys } from "./glidemq-streams.js";
import { RespError, RespMap, type RespValue } from "./protocol.js";

/**
 * glide-mq over RESP: glide-mq's Queue and Worker load the `glidemq` function library, call
 * `FCALL glidemq_*`, and read the queue's stream and hashes. The door never runs the library: it
 * recognises it at load, and answers each call and read from the backend that holds the queue,
 * through the Backend contract (enqueue, reserve, complete, fail, get, counts, pause), shaped as the
 * library and Redis shape them. The housekeeping glide-mq's Worker does in Redis (promoting delayed
 * jobs, reclaiming stalled ones, scheduler locks) is the backend's own work here, so those calls
 * answer "nothing to do". A call or key the door cannot honour answers an error naming it and why.
 * The key commands are glidemq-streams.ts's. A queue routed to a glidemq-valkey store is glide-mq's
 * own layout: its calls pass through to the store (glidemq-passthrough.ts).
 */

/** The library version glide-mq 0.15.4 checks with `FCALL glidemq_version` (its LIBRARY_VERSION). */
export const GLIDEMQ_LIBRARY_VERSION = "93";

/**
 * The `glidemq` library, recognised by its `#!lua name=glidemq` header; its version is what its
 * `glidemq_version` returns, else the version this door was written against.
 */
export function glideLibraryOf(source: string): { version: string } | RespError {
  const header = source.split("\n", 1)[0] ?? "";
  const name = /^#!lua\s+name=(\S+)/.exec(header.trim())?.[1];
  if (name === undefined) return new RespError("ERR Library metadata missing: the first line must be '#!lua name=<library>'");
  if (name !== "glidemq")
    return new RespError(`ERR Switchyard's RESP door loads glide-mq's function library only: library '${name}' is not loaded`);
  const version = /register_function\(\s*['"]glidemq_version['"][\s\S]{0,120}?return\s+['"](\d+)['"]/.exec(source)?.[1];
  return { version: version ?? GLIDEMQ_LIBRARY_VERSION };
}

/** A command that passes through to a glidemq-valkey store, and the access it needs on its queue. */
export interface PassedCommand {
  store: NamedBackend;
  queue: string;
  access: Access;
  args: string[];
}

/** JSON text a glide-mq client sent (data, opts, a return value), or a RESP error naming the call and the field. */
function parseJson(text: string, call: string, what: string): Json | RespError {
  try {
    return JSON.parse(text) as Json;
  } catch {
    return new RespError(`ERR FCALL ${call}: ${what} is not JSON text (compressed payloads are not served by Switchyard's RESP door)`);
  }
}

/** glidemq_addJob's ARGV past the name, data and opts, by position, with what the door does with each. */
const ADD_ARGS = {
  timestamp: 3,
  delay: 4,
  priority: 5,
  parentId: 6,
  maxAttempts: 7,
  orderingKey: 8,
  groupConcurrency: 9,
  groupRateMax: 10,
  groupRateDuration: 11,
  tbCapacity: 12,
  tbRefillRate: 13,
  cost: 14,
  ttl: 15,
  customJobId: 16,
  lifo: 17,
  parentQueue: 18,
  schedulerName: 19,
} as const;
/** The ARGV glidemq_addJob takes at least (glide-mq 0.15.4 sends 21). */
const ADD_ARG_COUNT = 17;
/** addJob options a core backend has no field for: refused rather than dropped. */
const UNSERVED_ADD_OPTIONS: Array<[keyof typeof ADD_ARGS, string]> = [
  ["parentId", "parent jobs (flows)"],
  ["orderingKey", "ordering keys"],
  ["groupConcurrency", "group concurrency"],
  ["groupRateMax", "group rate limits"],
  ["tbCapacity", "token buckets"],
  ["cost", "job costs"],
  ["ttl", "ttl"],
  ["lifo", "lifo"],
  ["schedulerName", "job schedulers"],
];

/** The core enqueue of glidemq_addJob's ARGV, or the error naming what the door does not serve. */
function addInputOf(args: string[]): EnqueueInput | RespError {
  const arg = (name: keyof typeof ADD_ARGS) => args[ADD_ARGS[name]] ?? "";
  for (const [name, what] of UNSERVED_ADD_OPTIONS) {
    const value = arg(name);
    if (value !== "" && value !== "0")
      return new RespError(`ERR FCALL glidemq_addJob: ${what} are not served by Switchyard's RESP door; nothing was stored`);
  }
  const data = parseJson(args[1] as string, "glidemq_addJob", "data");
  if (data instanceof RespError) return data;
  const opts = parseJson(args[2] as string, "glidemq_addJob", "opts");
  if (opts instanceof RespError) return opts;
  const options = opts !== null && typeof opts === "object" && !Array.isArray(opts) ? opts : {};
  const backoff = options.backoff as { type?: string; delay?: number } | undefined;
  const delay = Number(arg("delay")) || 0;
  const customId = arg("customJobId");
  return {
    name: args[0] as string,
    data,
    ...(customId !== "" ? { id: customId } : {}),
    ...(delay > 0 ? { delay } : {}),
    // glide-mq runs priority 1 first, then larger numbers, then priority-0 jobs: the glide-mq door's map.
    priority: corePriority(Number(arg("priority")) || 0),
    maxAttempts: Math.max(1, Number(arg("maxAttempts")) || 1),
    ...(backoff?.type === "fixed" || backoff?.type === "exponential"
      ? { backoff: { type: backoff.type, delay: Math.round(backoff.delay ?? 0) } }
      : {}),
    native: { opts: options },
  };
}

interface FunctionSpec {
  /** Least number of keys and of args the call takes (glide-mq 0.15.4 sends at least these). */
  keys: number;
  args: number;
  /** What the call does; `queue` is the queue its first key names. */
  run(call: { queue: string; keys: string[]; args: string[] }, context: GlideCallContext): Promise<RespValue> | RespValue;
}

/** The `glidemq_*` functions served, and the error of every other one. */
export class GlideMqFunctions {
  /** The library's version once a client loaded it (null: not loaded, as on an empty Redis). */
  #version: string | null = null;
  readonly #functions: Record<string, FunctionSpec>;
  readonly #locks = new WorkerLocks();
  readonly #keys: GlideMqKeys;

  constructor(
    private readonly router: QueueRouter,
    private readonly wakeups: Wakeups,
    private readonly backends: Map<string, NamedBackend>,
  ) {
    this.#keys = new GlideMqKeys(router, wakeups, this.#locks);
    const nothingToDo = (reply: RespValue): FunctionSpec => ({ keys: 0, args: 0, run: () => reply });
    this.#functions = {
      glidemq_addJob: { keys: 4, args: ADD_ARG_COUNT, run: (call, context) => this.#addJob(call, context) },
      glidemq_moveToActive: { keys: 1, args: 1, run: (call, context) => this.#moveToActive(call, context) },
      glidemq_complete: { keys: 5, args: 3, run: (call, context) => this.#complete(call, context, false) },
      glidemq_completeAndFetchNext: { keys: 5, args: 6, run: (call, context) => this.#complete(call, context, true) },
      glidemq_fail: { keys: 6, args: 6, run: (call, context) => this.#fail(call, context) },
      glidemq_pause: { keys: 1, args: 0, run: (call, context) => this.#pause(call, context, true) },
      glidemq_resume: { keys: 1, args: 0, run: (call, context) => this.#pause(call, context, false) },
      // The backend promotes due jobs, gives back expired leases and runs no schedulers of glide-mq's.
      glidemq_promote: nothingToDo(0),
      glidemq_promoteRateLimited: nothingToDo(0),
      glidemq_reclaimStalled: {
        keys: 0,
        args: 3,
        run: (call) => {
          this.#locks.note(call.args);
          return 0;
        },
      },
      glidemq_reclaimStalledListJobs: nothingToDo(0),
      glidemq_healListActive: nothingToDo(0),
      glidemq_sweepSuspended: nothingToDo(0),
      glidemq_nextDue: nothingToDo(-1),
      glidemq_popLists: nothingToDo([]),
      glidemq_tryLock: nothingToDo(1),
      glidemq_unlock: nothingToDo(1),
    };
  }

  /** The glidemq-valkey stores: glide-mq's library runs there, so it is loaded there too. */
  #glideStores(): NamedBackend[] {
    return [...this.backends.values()].filter(isGlideStore);
  }

  /**
   * `FUNCTION LOAD [REPLACE] <source>`: only glide-mq's library, kept by name and version, and
   * loaded into every glidemq-valkey store as it came (an error there is the answer).
   */
  async load(args: string[], context: GlideCallContext): Promise<RespValue> {
    const replace = args[0]?.toUpperCase() === "REPLACE";
    const source = replace ? args[1] : args[0];
    if (source === undefined || args.length > (replace ? 2 : 1))
      return new RespError("ERR wrong number of arguments for 'function|load' command");
    const library = glideLibraryOf(source);
    if (library instanceof RespError) return library;
    if (this.#version !== null && !replace) return new RespError("ERR Library 'glidemq' already exists");
    for (const store of this.#glideStores()) {
      const loaded = await context.forward(store, ["FUNCTION", "LOAD", ...args]);
      if (loaded instanceof RespError) return loaded;
    }
    this.#version = library.version;
    return "glidemq";
  }

  /** `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`: the library and the functions the door serves. */
  list(): RespValue {
    if (this.#version === null) return [];
    const functions = ["glidemq_version", ...Object.keys(this.#functions)].map(
      (name) =>
        new RespMap([
          ["name", name],
          ["description", null],
          ["flags", []],
        ]),
    );
    return [
      new RespMap([
        ["library_name", "glidemq"],
        ["engine", "LUA"],
        ["functions", functions],
      ]),
    ];
  }

  /** `FCALL <function> <numkeys> <keys...> <args...>`. */
  async fcall(rest: string[], context: GlideCallContext): Promise<RespValue> {
    const [name, count] = rest;
    if (name === undefined || count === undefined) return new RespError("ERR wrong number of arguments for 'fcall' command");
    const numkeys = Number(count);
    if (!Number.isInteger(numkeys) || numkeys < 0) return new RespError("ERR Bad number of keys provided");
    if (numkeys > rest.length - 2) return new RespError("ERR Number of keys can't be greater than number of args");
    const keys = rest.slice(2, 2 + numkeys);
    const args = rest.slice(2 + numkeys);
    if (!name.startsWith("glidemq_")) return new RespError("ERR Function not found");
    if (name === "glidemq_version") return this.#versionCheck(rest, context);
    // On a glidemq-valkey store the store's library answers, loaded or not.
    const passed = this.passthroughOf("FCALL", rest);
    if (passed) return this.pass(passed, context);
    if (this.#version === null) return new RespError("ERR Function not found");
    const spec = this.#functions[name];
    const key = keys[0] === undefined ? undefined : parseGlideKey(keys[0]);
    if (!spec)
      return new RespError(
        `ERR FCALL ${name} is not served by Switchyard's RESP door: it serves glide-mq's Queue (add, addBulk, getJob, getJobCounts, pause, resume) and Worker (claim, complete, fail); nothing was stored`,
      );
    if (keys.length < spec.keys || args.length < spec.args)
      return new RespError(
        `ERR FCALL ${name} takes at least ${spec.keys} keys and ${spec.args} args (got ${keys.length} and ${args.length})`,
      );
    if (spec.keys === 0) return spec.run({ queue: "", keys, args }, context);
    if (!key) return new RespError(`ERR FCALL ${name}: '${keys[0]}' is not a glide-mq key (<prefix>:{<queue>}:...)`);
    return spec.run({ queue: key.queue, keys, args }, context);
  }

  /**
   * `glidemq_version`: the version loaded here; with a glidemq-valkey store, the store's own answer,
   * so that a client loads the library when the store lacks it.
   */
  async #versionCheck(rest: string[], context: GlideCallContext): Promise<RespValue> {
    const [store] = this.#glideStores();
    if (!store) return this.#version ?? new RespError("ERR Function not found");
    const answer = await context.forward(store, ["FCALL", ...rest]);
    if (typeof answer === "string") this.#version = answer;
    return answer;
  }

  /**
   * Where a command goes when it passes through: an FCALL of glide-mq's or a key command it sends,
   * on a queue routed to a glidemq-valkey store; undefined for everything the door answers itself.
   * Synchronous, so a connection can send a run of these to the store without waiting for each.
   */
  passthroughOf(name: string, rest: string[]): PassedCommand | undefined {
    let key: GlideKey | undefined;
    let access: Access;
    if (name === "FCALL" || name === "FCALL_RO") {
      const [fn, count, first] = rest;
      if (!fn?.startsWith("glidemq_") || fn === "glidemq_version" || Number(count) < 1 || first === undefined) return undefined;
      key = parseGlideKey(first);
      access = fn === "glidemq_pause" || fn === "glidemq_resume" ? "admin" : "write";
    } else {
      if (!PASSED_KEY_COMMANDS.has(name)) return undefined;
      const named = name === "XGROUP" ? rest[1] : name === "XREADGROUP" ? rest[rest.length - 2] : rest[0];
      key = named === undefined ? undefined : parseGlideKey(named);
      access = READS.has(name) ? "read" : "write";
    }
    if (!key) return undefined;
    try {
      const store = this.#storeOf(key.queue);
      return store ? { store, queue: key.queue, access, args: [name, ...rest] } : undefined;
    } catch {
      return undefined; // a queue name no route takes: the door's own answer says so
    }
  }

  /** Sends a passed command to its store, once the connection's token may. */
  pass(passed: PassedCommand, context: GlideCallContext): Promise<RespValue> {
    context.authorize(passed.access, passed.queue);
    return context.forward(passed.store, passed.args);
  }

  /** The glidemq-valkey store a queue is routed to, if it is one. */
  #storeOf(queue: string): NamedBackend | undefined {
    const named = this.router.resolve(queue);
    return isGlideStore(named) ? named : undefined;
  }

  #backend(queue: string): Backend {
    return this.router.backendFor(queue);
  }

  async #addJob({ queue, args }: { queue: string; args: string[] }, context: GlideCallContext): Promise<RespValue> {
    context.authorize("write", queue);
    const input = addInputOf(args);
    if (input instanceof RespError) return input;
    const { job, created } = await this.#backend(queue).enqueue(queue, input);
    return created ? job.id : "duplicate";
  }

  /**
   * A run of `FCALL glidemq_addJob` pipelined back to back on one connection (glide-mq's addBulk, or
   * Queue.add calls in flight together): one `enqueueBulk` when every call is a plain add on the same
   * translated queue, that the token may write; otherwise, or when the bulk is refused (all or
   * nothing), each call by itself through `one`, so each answers as it would alone.
   */
  async addJobs(calls: string[][], context: GlideCallContext, one: (rest: string[]) => Promise<RespValue>): Promise<RespValue[]> {
    const byItself = async () => {
      const replies: RespValue[] = [];
      for (const rest of calls) replies.push(await one(rest));
      return replies;
    };
    let queue: string | undefined;
    const inputs: EnqueueInput[] = [];
    for (const rest of calls) {
      const key = rest[2] === undefined ? undefined : parseGlideKey(rest[2]);
      const input = rest[1] === "4" && rest.length - 6 >= ADD_ARG_COUNT && key ? addInputOf(rest.slice(6)) : undefined;
      if (!key || !input || input instanceof RespError || (queue !== undefined && key.queue !== queue)) return byItself();
      queue = key.queue;
      inputs.push(input);
    }
    if (queue === undefined || this.#version === null || this.passthroughOf("FCALL", calls[0] as string[])) return byItself();
    try {
      context.authorize("write", queue);
      const results = await this.#backend(queue).enqueueBulk(queue, inputs);
      return results.map(({ job, created }) => (created ? job.id : "duplicate"));
    } catch {
      return byItself();
    }
  }

  /** The job a worker read from the stream: already claimed by XREADGROUP, so its hash, active. */
  async #moveToActive({ queue, keys }: { queue: string; keys: string[] }, context: GlideCallContext): Promise<RespValue> {
    context.authorize("write", queue);
    const id = jobIdOf(keys[0] as string);
    const job = id === undefined ? null : await this.#backend(queue).get(queue, id);
    if (!job || job.state !== "active") return "";
    return flat(glideHash(job));
  }

  async #complete({ queue, args }: { queue: string; args: string[] }, context: GlideCallContext, fetchNext: boolean): Promise<RespValue> {
    context.authorize("write", queue);
    const [id, , returnvalue] = args as [string, string, string];
    const result =
      returnvalue === ""
        ? null
        : parseJson(returnvalue, fetchNext ? "glidemq_completeAndFetchNext" : "glidemq_complete", "the return value");
    if (result instanceof RespError) return result;
    const consumer = fetchNext ? (args[5] as string) : undefined;
    const backend = this.#backend(queue);
    await backend.complete(queue, id, { ...(consumer ? { worker: consumer } : {}), result });
    if (!fetchNext) return 1;
    const [next] = await backend.reserve(queue, { worker: consumer as string, count: 1, leaseMs: this.#locks.leaseOf(consumer as string) });
    return next ? ["NEXT_HASH", id, next.id, entryIdFor(next), ...flat(glideHash(next))] : ["NEXT_NONE", id];
  }

  /** Retries while the job's attempts last (the backend's own count, set from glide-mq's at add), with glide-mq's backoff. */
  async #fail({ queue, args }: { queue: string; args: string[] }, context: GlideCallContext): Promise<RespValue> {
    context.authorize("write", queue);
    const [id, , reason, , , backoff] = args as [string, string, string, string, string, string];
    const retryDelay = Number(backoff) || 0;
    const job = await this.#backend(queue).fail(queue, id, { error: { message: reason }, ...(retryDelay > 0 ? { retryDelay } : {}) });
    return job.state === "failed" ? "failed" : "retrying";
  }

  async #pause({ queue }: { queue: string }, context: GlideCallContext, pause: boolean): Promise<RespValue> {
    context.authorize("admin", queue);
    const backend = this.#backend(queue);
    await (pause ? backend.pause(queue) : backend.resume(queue));
    return 1;
  }

  /**
   * The Redis commands glide-mq sends on its queue's keys (glidemq-streams.ts), passed through on a
   * glidemq-valkey store; undefined when `name` is none of them or names no glide-mq key.
   */
  async keyCommand(name: string, rest: string[], context: GlideCallContext): Promise<RespValue | undefined> {
    // A key of no glide-mq queue: the connection's general answer (the door keeps no Redis keys).
    const named = name === "XGROUP" ? rest[1] : name === "XREADGROUP" ? rest[rest.length - 2] : rest[0];
    const key = named === undefined ? undefined : parseGlideKey(named);
    if (!key) return undefined;
    const passed = this.passthroughOf(name, rest);
    if (passed) return this.pass(passed, context);
    return this.#keys.command(name, rest, context);
  }
}

/** Key commands that only read: a read token may send them. */
const READS = new Set([
  "HGETALL",
  "HGET",
  "HMGET",
  "XLEN",
  "ZCARD",
  "LLEN",
  "GET",
  "XPENDING",
  "XRANGE",
  "ZRANGE",
  "ZSCORE",
  "LRANGE",
  "EXISTS",
]);
