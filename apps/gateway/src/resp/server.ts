import { createHash } from "node:crypto";
import { type AddressInfo, type Server, type Socket, createServer } from "node:net";
import { isSwitchyardError } from "@switchyard/core";
import type { Gateway } from "../app.js";
import { type Access, AuthError, type Principal, checkAccess } from "../auth.js";
import { QlessChannels, qlessLog } from "../doors/qless-channels.js";
import type { JobEvent } from "../events.js";
import type { Logger } from "../request-log.js";
import { GlideMqFunctions } from "./glidemq-functions.js";
import { StoreConnections } from "./glidemq-passthrough.js";
import type { GlideCallContext } from "./glidemq-shapes.js";
import { OK, RequestReader, RespError, RespMap, RespPush, RespStatus, type RespValue, encode } from "./protocol.js";
import {
  JidQueues,
  type QlessCallContext,
  type QlessDialect,
  isQlessScript,
  qlessDialectOf,
  qlessRecurScore,
  runQlessCall,
} from "./qless-script.js";

/**
 * The RESP door: a Redis-protocol listener (RESP2, and RESP3 after `HELLO 3`) where unmodified qless
 * clients run qless-core's script, and glide-mq's Queue and Worker their function library, onto any
 * backend. It serves the connection commands clients send (HELLO, AUTH with the gateway's tokens,
 * SELECT, PING, CLIENT, INFO, QUIT, RESET), scripts (SCRIPT LOAD/EXISTS/FLUSH, EVALSHA, EVAL) of which
 * it runs qless's, glide-mq's functions (FUNCTION LOAD/LIST, FCALL) with the stream and hash commands
 * glide-mq sends on its queues' keys (glidemq-functions.ts), and pub/sub (qless's `ql:log` events,
 * from the gateway's event stream). Anything else answers an error naming the command and why. No
 * command reaches a store as it was sent, but for glide-mq's on a glidemq-valkey store, which is
 * glide-mq's own layout (glidemq-passthrough.ts).
 */

export interface RespServerOptions {
  port: number;
  host: string;
  logger: Logger;
  /** Bytes waiting to be sent past which a subscriber is disconnected (`doors.resp.pubsubOutputLimitBytes`); 0: none. */
  pubsubOutputLimit: number;
}

export interface RunningRespServer {
  port: number;
  close(): Promise<void>;
}

/** Reported by INFO and HELLO: what clients check before they use scripts and RESP3. */
const REDIS_VERSION = "7.2.4";
/** A connection stops reading while this many of its requests wait for an answer (pipelining). */
const MAX_QUEUED = 1_000;

const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");

/**
 * qless's `ql:log` message for a job event of another door or another gateway (events qless does not
 * publish: none). The event does not say who held or failed the job, or why: a cancel names no worker
 * (""), a failure only its jid, event and queue.
 */
function qlessLogMessage(event: JobEvent): string | null {
  const jid = event.jobId;
  if (jid === undefined) return null;
  if (event.type === "enqueued" || event.type === "delayed") return qlessLog.put(jid, event.queue);
  if (event.type === "completed") return qlessLog.completed(jid, event.queue);
  if (event.type === "canceled") return qlessLog.canceled(jid, event.queue, "");
  if (event.type === "failed") return JSON.stringify({ jid, event: "failed", queue: event.queue });
  return null;
}

export async function startRespServer(gateway: Gateway, options: RespServerOptions): Promise<RunningRespServer> {
  /** Scripts loaded by any client, by sha: only qless's are kept (the others are refused at load). */
  const scripts = new Map<string, QlessDialect>();
  const jids = new JidQueues(gateway.backends);
  const glide = new GlideMqFunctions(gateway.router, gateway.wakeups, gateway.backends);
  let nextClientId = 1;
  const sockets = new Set<Socket>();

  const server: Server = createServer((socket) => {
    sockets.add(socket);
    const connection = new RespConnection(socket, nextClientId++, gateway, scripts, jids, glide, options);
    socket.on("close", () => {
      sockets.delete(socket);
      connection.closed();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.end();
      setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, 1_000).unref();
      await closed;
    },
  };
}

/** One client connection: its protocol, its token, its name, its subscriptions, its queue of requests. */
class RespConnection {
  #protocol: 2 | 3 = 2;
  #principal: Principal | null = null;
  #name: string | null = null;
  readonly #channels = new Set<string>();
  readonly #patterns = new Set<string>();
  #unsubscribeEvents: (() => void) | undefined;
  #queued = 0;
  /** Requests queued that the door answers itself (not passed through): later ones wait for them. */
  #ownPending = 0;
  #corked = false;
  /** The run of glidemq_addJob calls last queued, which later pipelined adds on its queue may join. */
  #adds: { calls: string[][]; started: boolean } | null = null;
  #chain: Promise<void> = Promise.resolve();
  #gone = false;
  /** Aborted when the client goes: ends a blocked XREADGROUP. */
  readonly #closing = new AbortController();
  /** This client's connections to glidemq-valkey stores, where its glide-mq commands pass through. */
  readonly #stores = new StoreConnections();

  constructor(
    private readonly socket: Socket,
    private readonly id: number,
    private readonly gateway: Gateway,
    private readonly scripts: Map<string, QlessDialect>,
    private readonly jids: JidQueues,
    private readonly glide: GlideMqFunctions,
    private readonly options: Pick<RespServerOptions, "logger" | "pubsubOutputLimit">,
  ) {
    const reader = new RequestReader(
      (args) => this.#enqueue(args),
      (message) => {
        this.#write(new RespError(`ERR ${message}`));
        socket.end();
      },
    );
    socket.on("data", (chunk: Buffer) => reader.push(chunk));
    // A client that goes away mid-reply is just gone; the other connections carry on.
    socket.on("error", () => socket.destroy());
  }

  closed(): void {
    this.#gone = true;
    this.#closing.abort();
    this.#stores.close();
    this.#unsubscribeEvents?.();
  }

  /**
   * Requests are answered one after another, in the order they came (pipelining keeps its order). A
   * run of commands that pass through to a glidemq-valkey store is sent on at once, as it comes: the
   * store connection keeps their order, and only the replies wait their turn.
   */
  #enqueue(args: string[]): void {
    this.#queued++;
    if (this.#queued >= MAX_QUEUED) this.socket.pause();
    const passed = this.#ownPending === 0 ? this.#passNow(args) : undefined;
    passed?.catch(() => undefined); // awaited (and its failure logged) in turn below
    if (!passed && this.#joinAdds(args)) return;
    const adds = !passed && isAddJob(args) ? { calls: [args.slice(1)], started: false } : null;
    this.#adds = adds;
    if (!passed) this.#ownPending++;
    this.#chain = this.#chain.then(async () => {
      if (adds) adds.started = true;
      if (!this.#gone) {
        const failed = (error: Error) => {
          this.options.logger.error({ err: error.message, command: args[0] }, "resp door: a command failed unexpectedly");
          return new RespError("ERR internal error; see the gateway's log");
        };
        if (adds && adds.calls.length > 1) {
          const replies = await this.#runAdds(adds.calls).catch((error: Error) => adds.calls.map(() => failed(error)));
          for (const reply of replies) this.#write(reply);
        } else {
          const reply = await (passed ?? this.#run(args)).catch(failed);
          if (reply !== undefined) this.#write(reply);
        }
      }
      if (!passed) this.#ownPending--;
      this.#queued -= adds?.calls.length ?? 1;
      if (this.#queued < MAX_QUEUED / 10) this.socket.resume();
    });
  }

  /** An add that joins the run of adds queued just before it, not started yet, on the same queue. */
  #joinAdds(args: string[]): boolean {
    const adds = this.#adds;
    if (!adds || adds.started || adds.calls.length >= MAX_ADDS_AT_ONCE || !isAddJob(args) || adds.calls[0]?.[2] !== args[3]) return false;
    adds.calls.push(args.slice(1));
    return true;
  }

  /** A run of glide-mq adds: one bulk enqueue where it can (glidemq-functions.ts), each by itself where not. */
  async #runAdds(calls: string[][]): Promise<RespValue[]> {
    const one = async (rest: string[]) => (await this.#run(["FCALL", ...rest])) as RespValue;
    const subscribed = this.#channels.size + this.#patterns.size > 0;
    if (subscribed || (this.#authEnabled && !this.#principal)) {
      const replies: RespValue[] = [];
      for (const rest of calls) replies.push(await one(rest));
      return replies;
    }
    const replies = await this.#glideCall("FCALL", () => this.glide.addJobs(calls, this.#glideContext(), one));
    return Array.isArray(replies) ? replies : calls.map(() => replies as RespValue);
  }

  /** A passed-through command started now, when nothing the door answers itself is still ahead of it. */
  #passNow(args: string[]): Promise<RespValue | undefined> | undefined {
    const subscribed = this.#channels.size + this.#patterns.size > 0;
    if (subscribed || (this.#authEnabled && !this.#principal)) return undefined;
    const name = (args[0] as string).toUpperCase();
    const passed = this.glide.passthroughOf(name, args.slice(1));
    return passed && this.#glideCall(name, () => this.glide.pass(passed, this.#glideContext()));
  }

  /**
   * Replies written in one turn of the event loop leave in one write: a pipelining client (valkey-glide
   * sends a Batch at once) then reads them together rather than one segment each, which costs it far more.
   */
  #write(reply: RespValue): void {
    if (this.socket.destroyed || !this.socket.writable) return;
    if (!this.#corked) {
      this.#corked = true;
      this.socket.cork();
      setImmediate(() => {
        this.#corked = false;
        this.socket.uncork();
      });
    }
    this.socket.write(encode(reply, this.#protocol));
  }

  get #authEnabled(): boolean {
    return this.gateway.auth.enabled;
  }

  #authorize(door: string, access: Access, queue?: string): void {
    if (!this.#authEnabled) return;
    if (!this.#principal) throw new AuthError(401, "authentication required");
    checkAccess(this.#principal, door, access, queue);
  }

  #authenticate(token: string): RespValue {
    const principal = this.gateway.auth.identify(token);
    if (!principal) return new RespError("WRONGPASS invalid username-password pair or user is disabled.");
    this.#principal = principal;
    return OK;
  }

  /** One request; undefined when the command answers by itself (SUBSCRIBE writes one reply per channel). */
  async #run(args: string[]): Promise<RespValue | undefined> {
    const name = (args[0] as string).toUpperCase();
    const rest = args.slice(1);
    const subscribed = this.#channels.size + this.#patterns.size > 0;
    if (subscribed && this.#protocol === 2 && !SUBSCRIBED_COMMANDS.has(name))
      return new RespError(
        `ERR Can't execute '${args[0]?.toLowerCase()}': only (P)SUBSCRIBE / (P)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context`,
      );
    if (this.#authEnabled && !this.#principal && !OPEN_COMMANDS.has(name)) return new RespError("NOAUTH Authentication required.");

    switch (name) {
      case "PING":
        if (subscribed && this.#protocol === 2) return ["pong", rest[0] ?? ""];
        return rest[0] ?? new RespStatus("PONG");
      case "ECHO":
        return rest.length === 1 ? (rest[0] as string) : wrongArity(name);
      case "HELLO":
        return this.#hello(rest);
      case "AUTH":
        if (rest.length < 1 || rest.length > 2) return wrongArity(name);
        if (!this.#authEnabled)
          return new RespError(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
          );
        return this.#authenticate(rest[rest.length - 1] as string);
      case "SELECT": {
        const index = Number(rest[0]);
        // Database numbers mean nothing here (queues are routed by name); 0-15 are accepted as Redis does.
        return Number.isInteger(index) && index >= 0 && index < 16 ? OK : new RespError("ERR DB index is out of range");
      }
      case "CLIENT":
        return this.#client(rest);
      case "INFO":
        // valkey-glide reads `role:master` (INFO REPLICATION) before it sends anything to a standalone server.
        return `# Server\r\nredis_version:${REDIS_VERSION}\r\nredis_mode:standalone\r\nswitchyard_door:resp\r\n# Persistence\r\nloading:0\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n`;
      case "COMMAND":
        return (rest[0] ?? "").toUpperCase() === "COUNT" ? 0 : [];
      case "QUIT":
        this.#write(OK);
        this.socket.end();
        return undefined;
      case "RESET":
        this.#reset();
        return new RespStatus("RESET");
      case "SCRIPT":
        return this.#script(rest);
      case "EVALSHA":
      case "EVALSHA_RO":
        return this.#evalsha(rest);
      case "EVAL":
      case "EVAL_RO":
        return this.#eval(rest);
      case "SUBSCRIBE":
      case "PSUBSCRIBE":
        return this.#subscribe(name === "PSUBSCRIBE", rest);
      case "UNSUBSCRIBE":
      case "PUNSUBSCRIBE":
        return this.#unsubscribe(name === "PUNSUBSCRIBE", rest);
      case "FUNCTION":
        return this.#glideCall(name, () => this.#function(rest));
      case "FCALL":
      case "FCALL_RO":
        return this.#glideCall(name, () => this.glide.fcall(rest, this.#glideContext()));
      default: {
        const recurScore = name === "ZSCORE" ? await qlessRecurScore(this.#qlessContext(), rest) : undefined;
        if (recurScore !== undefined) return recurScore;
        const reply = await this.#glideCall(name, () => this.glide.keyCommand(name, rest, this.#glideContext()));
        // A null reply is an answer (a key glide-mq reads that holds nothing); undefined is "not served".
        return reply !== undefined
          ? reply
          : new RespError(
              `ERR '${args[0]}' is not served by Switchyard's RESP door: it runs qless's script (EVALSHA/EVAL) and glide-mq's functions (FCALL) onto the gateway's backends; jobs are not Redis keys here`,
            );
      }
    }
  }

  async #function(rest: string[]): Promise<RespValue> {
    const sub = (rest[0] ?? "").toUpperCase();
    if (sub === "LOAD") return this.glide.load(rest.slice(1), this.#glideContext());
    if (sub === "LIST") return this.glide.list();
    return new RespError(
      `ERR 'FUNCTION ${rest[0] ?? ""}' is not served by Switchyard's RESP door: it serves FUNCTION LOAD and LIST of glide-mq's library`,
    );
  }

  #glideContext(): GlideCallContext {
    return {
      protocol: this.#protocol,
      authorize: (access, queue) => this.#authorize("glidemq", access, queue),
      signal: this.#closing.signal,
      forward: (store, args) => this.#stores.forward(store, args, this.#protocol),
    };
  }

  /** A glide-mq call or key read, its errors in Redis's words: what the token lacks, or the backend's reason. */
  async #glideCall(command: string, run: () => Promise<RespValue | undefined>): Promise<RespValue | undefined> {
    try {
      return await run();
    } catch (error) {
      if (error instanceof AuthError) return new RespError(`NOPERM ${error.message}`);
      if (isSwitchyardError(error)) return new RespError(`ERR ${command}: ${error.code}: ${error.message}`);
      throw error;
    }
  }

  #hello(rest: string[]): RespValue {
    let index = 0;
    if (rest[0] !== undefined) {
      const version = Number(rest[0]);
      if (version !== 2 && version !== 3) return new RespError("NOPROTO unsupported protocol version");
      index = 1;
      for (; index < rest.length; index++) {
        const option = (rest[index] as string).toUpperCase();
        if (option === "AUTH" && index + 2 < rest.length) {
          const answer = this.#authEnabled ? this.#authenticate(rest[index + 2] as string) : OK;
          if (answer instanceof RespError) return answer;
          index += 2;
        } else if (option === "SETNAME" && index + 1 < rest.length) {
          this.#name = rest[++index] as string;
        } else return new RespError(`ERR Syntax error in HELLO option '${rest[index]}'`);
      }
      if (this.#authEnabled && !this.#principal)
        return new RespError(
          "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        );
      this.#protocol = version as 2 | 3;
    }
    return new RespMap([
      ["server", "redis"],
      ["version", REDIS_VERSION],
      ["proto", this.#protocol],
      ["id", this.id],
      ["mode", "standalone"],
      ["role", "master"],
      ["modules", []],
    ]);
  }

  #client(rest: string[]): RespValue {
    const sub = (rest[0] ?? "").toUpperCase();
    if (sub === "SETNAME") {
      this.#name = rest[1] ?? "";
      return OK;
    }
    if (sub === "GETNAME") return this.#name;
    if (sub === "ID") return this.id;
    // Library name and version (redis-py, node-redis, valkey-glide send them on connect), no-evict, tracking off.
    if (["SETINFO", "NO-EVICT", "NO-TOUCH", "TRACKING"].includes(sub)) return OK;
    return new RespError(`ERR 'CLIENT ${rest[0] ?? ""}' is not served by Switchyard's RESP door`);
  }

  #script(rest: string[]): RespValue {
    const sub = (rest[0] ?? "").toUpperCase();
    if (sub === "LOAD") {
      if (rest.length !== 2) return wrongArity("SCRIPT|LOAD");
      const source = rest[1] as string;
      if (!isQlessScript(source))
        return new RespError("ERR Switchyard's RESP door runs qless's script only: this script is not qless-core's, so it is not loaded");
      const sha = sha1(source);
      this.scripts.set(sha, qlessDialectOf(source));
      return sha;
    }
    if (sub === "EXISTS") return rest.slice(1).map((sha) => (this.scripts.has(sha.toLowerCase()) ? 1 : 0));
    if (sub === "FLUSH") {
      this.scripts.clear();
      return OK;
    }
    return new RespError(`ERR 'SCRIPT ${rest[0] ?? ""}' is not served by Switchyard's RESP door`);
  }

  /** `<sha or script> <numkeys> <keys...> <args...>` split as Redis splits it. */
  #splitCall(rest: string[]): { keys: string[]; argv: string[] } | RespError {
    const count = Number(rest[1]);
    if (!Number.isInteger(count) || count < 0) return new RespError("ERR value is not an integer or out of range");
    if (count > rest.length - 2) return new RespError("ERR Number of keys can't be greater than number of args");
    return { keys: rest.slice(2, 2 + count), argv: rest.slice(2 + count) };
  }

  async #evalsha(rest: string[]): Promise<RespValue> {
    if (rest.length < 2) return wrongArity("EVALSHA");
    const dialect = this.scripts.get((rest[0] as string).toLowerCase());
    if (!dialect) return new RespError("NOSCRIPT No matching script. Please use EVAL.");
    return this.#call(dialect, rest);
  }

  async #eval(rest: string[]): Promise<RespValue> {
    if (rest.length < 2) return wrongArity("EVAL");
    if (!isQlessScript(rest[0] as string))
      return new RespError("ERR Switchyard's RESP door runs qless's script only: this script is not qless-core's");
    const dialect = qlessDialectOf(rest[0] as string);
    this.scripts.set(sha1(rest[0] as string), dialect);
    return this.#call(dialect, rest);
  }

  async #call(dialect: QlessDialect, rest: string[]): Promise<RespValue> {
    const call = this.#splitCall(rest);
    if (call instanceof RespError) return call;
    return runQlessCall(this.#qlessContext(), dialect, call.keys, call.argv);
  }

  #qlessContext(): QlessCallContext {
    return {
      router: this.gateway.router,
      backends: this.gateway.backends,
      jids: this.jids,
      qlessSettings: this.gateway.qlessSettings,
      qlessClock: this.gateway.config.doors.qless.clock,
      authorize: (access, queue) => this.#authorize("qless", access, queue),
    };
  }

  #subscribe(pattern: boolean, names: string[]): undefined | RespError {
    if (names.length === 0) return wrongArity(pattern ? "PSUBSCRIBE" : "SUBSCRIBE");
    const set = pattern ? this.#patterns : this.#channels;
    for (const name of names) {
      set.add(name);
      this.#write(new RespPush([pattern ? "psubscribe" : "subscribe", name, this.#channels.size + this.#patterns.size]));
    }
    if (!this.#unsubscribeEvents) {
      const events = this.gateway.events.subscribe((event) => this.#publish(event));
      const qless = this.gateway.qlessSettings.channels.subscribe((channel, message, queue) => this.#deliver(channel, message, queue));
      this.#unsubscribeEvents = () => {
        events();
        qless();
      };
    }
    return undefined;
  }

  #unsubscribe(pattern: boolean, names: string[]): undefined {
    const set = pattern ? this.#patterns : this.#channels;
    const leaving = names.length > 0 ? names : [...set];
    if (leaving.length === 0) this.#write(new RespPush([pattern ? "punsubscribe" : "unsubscribe", null, 0]));
    for (const name of leaving) {
      set.delete(name);
      this.#write(new RespPush([pattern ? "punsubscribe" : "unsubscribe", name, this.#channels.size + this.#patterns.size]));
    }
    if (this.#channels.size + this.#patterns.size === 0) {
      this.#unsubscribeEvents?.();
      this.#unsubscribeEvents = undefined;
    }
    return undefined;
  }

  /**
   * Tells a subscriber of `ql:log` what qless would have published for a job event. A move made by a
   * translated qless command is told by the command itself, in qless's full words (doors/qless-channels.ts).
   */
  #publish(event: JobEvent): void {
    if (QlessChannels.inCommand) return;
    const message = qlessLogMessage(event);
    if (message !== null) this.#deliver("ql:log", message, event.queue);
  }

  /** A message on `channel` to this connection, if it listens there and its token may see `queue` (any queue: none named). */
  #deliver(channel: string, message: string, queue: string | undefined): void {
    const allowed = this.#principal?.queues;
    if (this.#authEnabled && allowed && (queue === undefined || !allowed.some((pattern) => pattern.test(queue)))) return;
    if (this.#tooFarBehind()) return;
    if (this.#channels.has(channel)) this.#write(new RespPush(["message", channel, message]));
    for (const pattern of this.#patterns)
      if (globMatches(pattern, channel)) this.#write(new RespPush(["pmessage", pattern, channel, message]));
  }

  /**
   * A subscriber that does not read (or reads slower than messages come) is disconnected once more
   * than the limit waits to be sent to it, as Redis does, instead of the gateway holding every message.
   */
  #tooFarBehind(): boolean {
    const limit = this.options.pubsubOutputLimit;
    if (limit === 0 || this.socket.writableLength <= limit) return false;
    if (!this.socket.destroyed) {
      this.options.logger.warn(
        { client: this.id, waiting: this.socket.writableLength, limit },
        "resp door: a subscriber too far behind, disconnected",
      );
      this.socket.destroy();
    }
    return true;
  }

  #reset(): void {
    this.#protocol = 2;
    this.#principal = null;
    this.#name = null;
    this.#channels.clear();
    this.#patterns.clear();
    this.#unsubscribeEvents?.();
    this.#unsubscribeEvents = undefined;
  }
}

/** How many pipelined glide-mq adds one bulk enqueue takes at most. */
const MAX_ADDS_AT_ONCE = 100;
/** `FCALL glidemq_addJob 4 <keys...> ...`: an add glide-mq's Queue sends, which may be enqueued with its neighbours. */
const isAddJob = (args: string[]) => args[0]?.toUpperCase() === "FCALL" && args[1] === "glidemq_addJob" && args[2] === "4";

/** Commands a connection may send before AUTH when tokens are configured. */
const OPEN_COMMANDS = new Set(["AUTH", "HELLO", "QUIT", "RESET"]);
/** Commands a RESP2 connection may send while subscribed. */
const SUBSCRIBED_COMMANDS = new Set(["SUBSCRIBE", "PSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "PING", "QUIT", "RESET"]);

const wrongArity = (command: string) => new RespError(`ERR wrong number of arguments for '${command.toLowerCase()}' command`);

/** Redis's glob patterns for PSUBSCRIBE: `*`, `?` and `[...]`. */
function globMatches(pattern: string, channel: string): boolean {
  const source = pattern
    .replace(/[.+^${}()|\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${source}$`).test(channel);
}
