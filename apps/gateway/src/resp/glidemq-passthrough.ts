import { Redis, type RedisOptions } from "ioredis";
import type { NamedBackend } from "../backends.js";
import { OK, RespError, RespMap, type RespValue } from "./protocol.js";

/**
 * glide-mq over RESP onto a glidemq-valkey backend: the store already is glide-mq's layout, so the
 * door sends the client's commands to it as they came (its FCALLs run glide-mq's own library there)
 * instead of translating them. Only the commands the door serves for glide-mq pass, and only on the
 * keys of a queue routed to that store; each client connection gets its own store connection, so a
 * blocked XREADGROUP holds up no one else.
 */

/** The key commands glide-mq's Queue and Worker send that pass through to a glidemq-valkey store. */
export const PASSED_KEY_COMMANDS = new Set([
  "HGETALL",
  "HGET",
  "HMGET",
  "HSET",
  "XLEN",
  "ZCARD",
  "LLEN",
  "GET",
  "SET",
  "DEL",
  "XGROUP",
  "XPENDING",
  "XREADGROUP",
  "XACK",
  "XAUTOCLAIM",
  "XRANGE",
  "ZRANGE",
  "ZSCORE",
  "LRANGE",
  "EXISTS",
]);

/** A standalone glidemq-valkey store; a cluster one is served through the Backend contract like any other backend. */
export const isGlideStore = (named: NamedBackend) => named.spec.type === "glidemq-valkey" && !named.spec.options.cluster;

/** One client connection's connections to the glidemq-valkey stores, opened on first use. */
export class StoreConnections {
  readonly #clients = new Map<string, Redis>();

  async forward(store: NamedBackend, args: string[], protocol: 2 | 3): Promise<RespValue> {
    let client = this.#clients.get(store.name);
    if (!client) {
      const options = (store.spec.options.redisOptions ?? {}) as RedisOptions;
      // Auto-pipelining: the commands a client pipelined leave for the store in one write too.
      client = new Redis(store.spec.url, { ...options, maxRetriesPerRequest: 1, enableAutoPipelining: true });
      client.on("error", () => undefined); // a refused connection fails the call; ioredis reconnects
      this.#clients.set(store.name, client);
    }
    try {
      return asReply((args[0] as string).toUpperCase(), await client.call(args[0] as string, ...args.slice(1)), protocol);
    } catch (caught) {
      const error = caught as Error;
      // The store's own error reply ("ERR Function not found", "NOGROUP ...") is the answer, as it came.
      if (error.name === "ReplyError") return new RespError(error.message);
      return new RespError(`ERR ${args[0]}: backend "${store.name}" did not answer: ${error.message}`);
    }
  }

  close(): void {
    for (const client of this.#clients.values()) client.disconnect();
    this.#clients.clear();
  }
}

/** ioredis reads replies as RESP2: the replies that are maps in RESP3 become maps again. */
function asReply(command: string, value: unknown, protocol: 2 | 3): RespValue {
  if (value === "OK" && (command === "SET" || command === "XGROUP")) return OK;
  if (command === "HGETALL" && Array.isArray(value)) return new RespMap(pairs(value as string[]));
  if (command === "XREADGROUP" && protocol === 3 && Array.isArray(value))
    return new RespMap((value as Array<[string, RespValue]>).map(([stream, entries]) => [stream, entries]));
  return value as RespValue;
}

function pairs(flat: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i] as string, flat[i + 1] as string]);
  return out;
}
