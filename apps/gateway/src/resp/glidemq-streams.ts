import type { QueueRouter } from "../router.js";
import type { Wakeups } from "../wakeups.js";
import {
  type GlideCallContext,
  type WorkerLocks,
  entryIdFor,
  glideHash,
  jobIdOf,
  keyOf,
  notServedKey,
  wrongArity,
} from "./glidemq-shapes.js";
import { OK, RespError, RespMap, type RespValue } from "./protocol.js";

/**
 * The Redis commands glide-mq's Queue and Worker send on a queue's keys, answered from the backend
 * that holds the queue: the job hash (getJob), the counts (getJobCounts: XLEN = waiting + active,
 * ZCARD scheduled = delayed, XPENDING = active by worker), the stream a Worker reads (XREADGROUP is a
 * reserve for the consumer, with its lock duration as the lease), the Worker's heartbeat (HSET
 * lastActive) and its registry (SET/DEL w:<consumer>, kept by no backend).
 */
export class GlideMqKeys {
  /** Queues whose consumer group a worker created (XGROUP CREATE), for XPENDING's NOGROUP. */
  readonly #groups = new Set<string>();

  constructor(
    private readonly router: QueueRouter,
    private readonly wakeups: Wakeups,
    private readonly locks: WorkerLocks,
  ) {}

  /** `name` on a key of glide-mq's queue `rest` names; undefined when the door serves no such command. */
  async command(name: string, rest: string[], context: GlideCallContext): Promise<RespValue | undefined> {
    switch (name) {
      case "HGETALL":
      case "HGET":
      case "HMGET":
        return this.#hashRead(name, rest, context);
      case "XLEN":
      case "ZCARD":
      case "LLEN":
        return this.#countRead(name, rest, context);
      case "GET": {
        const key = keyOf(name, rest[0], context, "read");
        if (key instanceof RespError) return key;
        return key.rest === "list-active" ? null : notServedKey(name, rest[0] as string);
      }
      case "XGROUP":
        return this.#xgroup(rest, context);
      case "XPENDING":
        return this.#xpending(rest, context);
      case "XREADGROUP":
        return this.#xreadgroup(rest, context);
      case "XACK": {
        // The worker functions acknowledge as they finish a job; a later XACK finds nothing pending.
        const key = keyOf(name, rest[0], context, "write");
        return key instanceof RespError ? key : rest.length < 3 ? wrongArity(name) : 0;
      }
      case "XAUTOCLAIM": {
        // Expired leases come back through reserve by themselves: nothing for a worker to claim.
        const key = keyOf(name, rest[0], context, "write");
        return key instanceof RespError ? key : rest.length < 5 ? wrongArity(name) : ["0-0", [], []];
      }
      case "HSET":
        return this.#heartbeat(rest, context);
      case "SET":
      case "DEL": {
        // The worker registry (`<prefix>:{queue}:w:<consumer>`): noted by Redis, kept by no backend.
        const key = keyOf(name, rest[0], context, "write");
        if (key instanceof RespError) return key;
        if (!key.rest.startsWith("w:") || (name === "DEL" && rest.length !== 1)) return notServedKey(name, rest[0] as string);
        return name === "SET" ? OK : 1;
      }
      default:
        return undefined;
    }
  }

  async #hashRead(name: string, rest: string[], context: GlideCallContext): Promise<RespValue> {
    if (rest.length < (name === "HGETALL" ? 1 : 2) || (name === "HGETALL" && rest.length !== 1)) return wrongArity(name);
    const key = keyOf(name, rest[0], context, "read");
    if (key instanceof RespError) return key;
    const fieldsAsked = rest.slice(1);
    if (key.rest === "meta") {
      const paused = (await this.router.backendFor(key.queue).isPaused(key.queue)) ? "1" : "0";
      const value = (field: string) => (field === "paused" ? paused : null);
      if (name === "HGETALL") return new RespMap([["paused", paused]]);
      return name === "HGET" ? value(fieldsAsked[0] as string) : fieldsAsked.map(value);
    }
    if (key.rest === "schedulers" && name === "HGETALL") return new RespMap([]);
    const id = jobIdOf(rest[0] as string);
    if (id === undefined) return notServedKey(name, rest[0] as string);
    const job = await this.router.backendFor(key.queue).get(key.queue, id);
    const fields = job ? glideHash(job) : [];
    if (name === "HGETALL") return new RespMap(fields);
    const value = (field: string) => fields.find(([candidate]) => candidate === field)?.[1] ?? null;
    return name === "HGET" ? value(fieldsAsked[0] as string) : fieldsAsked.map(value);
  }

  /**
   * A Worker's heartbeat, `HSET <job> lastActive <ms>` every lockDuration / 2: the lease of whoever
   * holds the job is extended by a lock duration. Redis answers 0 (the field existed).
   */
  async #heartbeat(rest: string[], context: GlideCallContext): Promise<RespValue> {
    const key = keyOf("HSET", rest[0], context, "write");
    if (key instanceof RespError) return key;
    const id = jobIdOf(rest[0] as string);
    if (id === undefined || rest.length !== 3 || rest[1] !== "lastActive")
      return new RespError(`ERR 'HSET' on '${rest[0]}' is served for a Worker's heartbeat only (HSET <job> lastActive <ms>)`);
    const backend = this.router.backendFor(key.queue);
    const job = await backend.get(key.queue, id);
    if (job?.state === "active" && job.lease)
      await backend.heartbeat(key.queue, id, { worker: job.lease.worker, leaseMs: this.locks.leaseOf(job.lease.worker) });
    return 0;
  }

  async #countRead(name: string, rest: string[], context: GlideCallContext): Promise<RespValue> {
    if (rest.length !== 1) return wrongArity(name);
    const key = keyOf(name, rest[0], context, "read");
    if (key instanceof RespError) return key;
    const which = `${name} ${key.rest}`;
    // Prioritized and LIFO jobs are ordered by the backend: nothing waits in glide-mq's lists.
    if (which === "LLEN priority" || which === "LLEN lifo") return 0;
    if (!["XLEN stream", "ZCARD completed", "ZCARD failed", "ZCARD scheduled"].includes(which))
      return notServedKey(name, rest[0] as string);
    const counts = await this.router.backendFor(key.queue).counts(key.queue);
    if (which === "XLEN stream") return counts.waiting + counts.active;
    if (which === "ZCARD completed") return counts.completed;
    if (which === "ZCARD failed") return counts.failed + counts.canceled;
    return counts.delayed;
  }

  #xgroup(rest: string[], context: GlideCallContext): RespValue {
    if ((rest[0] ?? "").toUpperCase() !== "CREATE")
      return new RespError(`ERR 'XGROUP ${rest[0] ?? ""}' is not served by Switchyard's RESP door`);
    if (rest.length < 4) return wrongArity("XGROUP|CREATE");
    const key = keyOf("XGROUP", rest[1], context, "write");
    if (key instanceof RespError) return key;
    if (key.rest !== "stream") return notServedKey("XGROUP", rest[1] as string);
    if (this.#groups.has(key.queue)) return new RespError("BUSYGROUP Consumer Group name already exists");
    this.#groups.add(key.queue);
    return OK;
  }

  /** The summary form, `XPENDING <stream> <group>`: the active jobs, by the worker holding each. */
  async #xpending(rest: string[], context: GlideCallContext): Promise<RespValue> {
    if (rest.length !== 2)
      return new RespError("ERR Switchyard's RESP door serves the summary form of XPENDING only: XPENDING <stream> <group>");
    const key = keyOf("XPENDING", rest[0], context, "read");
    if (key instanceof RespError) return key;
    if (key.rest !== "stream") return notServedKey("XPENDING", rest[0] as string);
    const backend = this.router.backendFor(key.queue);
    const { items } = await backend.list(key.queue, { state: "active", limit: 1000 });
    if (items.length === 0 && !this.#groups.has(key.queue))
      return new RespError(`NOGROUP No such key '${rest[0]}' or consumer group '${rest[1]}'`);
    if (items.length === 0) return [0, null, null, null];
    const byWorker = new Map<string, number>();
    for (const job of items) byWorker.set(job.lease?.worker ?? "", (byWorker.get(job.lease?.worker ?? "") ?? 0) + 1);
    const ids = items.map((job) => `${job.startedAt ?? 0}-0`).sort();
    return [items.length, ids[0] as string, ids[ids.length - 1] as string, [...byWorker].map(([worker, count]) => [worker, String(count)])];
  }

  /**
   * `XREADGROUP GROUP <group> <consumer> [COUNT n] [BLOCK ms] [NOACK] STREAMS <stream> >`: new entries
   * are jobs the backend hands the consumer (reserve, with glide-mq's lock duration as the lease).
   */
  async #xreadgroup(rest: string[], context: GlideCallContext): Promise<RespValue> {
    if ((rest[0] ?? "").toUpperCase() !== "GROUP" || rest.length < 6) return new RespError("ERR syntax error");
    const consumer = rest[2] as string;
    // No COUNT: one job. Redis would hand every new entry, but each entry here is a leased claim.
    let count = 1;
    let block: number | undefined;
    let at = 3;
    for (; at < rest.length; at++) {
      const option = (rest[at] as string).toUpperCase();
      if (option === "COUNT") count = Number(rest[++at]);
      else if (option === "BLOCK") block = Number(rest[++at]);
      else if (option === "NOACK") continue;
      else if (option === "STREAMS") break;
      else return new RespError("ERR syntax error");
    }
    const streams = rest.slice(at + 1);
    if (!Number.isInteger(count) || count < 1 || (block !== undefined && (!Number.isInteger(block) || block < 0)))
      return new RespError("ERR value is not an integer or out of range");
    if (streams.length !== 2) return new RespError("ERR Switchyard's RESP door reads one stream per XREADGROUP");
    const [stream, from] = streams as [string, string];
    if (from !== ">")
      return new RespError(
        "ERR XREADGROUP with an id other than '>' is not served by Switchyard's RESP door: a job's claim is kept by the backend, not in a pending list",
      );
    const key = keyOf("XREADGROUP", stream, context, "write");
    if (key instanceof RespError) return key;
    if (key.rest !== "stream") return notServedKey("XREADGROUP", stream);
    const backend = this.router.backendFor(key.queue);
    const take = async () => {
      const jobs = await backend.reserve(key.queue, { worker: consumer, count, leaseMs: this.locks.leaseOf(consumer) });
      return jobs.length > 0 ? jobs : undefined;
    };
    // BLOCK 0 waits until a job comes, as Redis does; no BLOCK answers at once.
    const waitMs = block === undefined ? 0 : block === 0 ? Number.POSITIVE_INFINITY : block;
    const jobs = await this.wakeups.reserveWaiting(key.queue, take, waitMs, context.signal);
    if (!jobs) return null;
    const entries: RespValue = jobs.map((job) => [entryIdFor(job), ["jobId", job.id, "name", job.name]]);
    return context.protocol === 3 ? new RespMap([[stream, entries]]) : [[stream, entries]];
  }
}
