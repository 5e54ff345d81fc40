import type { Redis } from "ioredis";

/**
 * The qless command script as a Redis 7 function library, which the adapter calls with FCALL.
 *
 * A script's whole body runs on every EVALSHA: the command table and the two hundred local functions
 * behind it are made again for each call, which costs Redis about 35 µs before the command does
 * anything (a `put` measured 53 µs of Redis CPU by EVALSHA, 17 µs by FCALL; `config.get` 35 µs and
 * 3 µs). A library's body runs once, at FUNCTION LOAD, and FCALL runs only the command. The text is
 * the script's own, its last line (`return dispatch(KEYS, ARGV)`) replaced by registering `dispatch`,
 * so both run the same commands. The library is named after the script's SHA-1: gateways of
 * different versions on one Redis each call their own. qless's own clients keep EVALSHA of the script.
 */
export interface QlessLibrary {
  /** The library's name, which is also its one function's name. */
  name: string;
  source: string;
}

const ENTRY_LINE = "return dispatch(KEYS, ARGV)";

export function qlessLibraryOf(scriptSource: string, scriptSha: string): QlessLibrary {
  const entry = scriptSource.lastIndexOf(ENTRY_LINE);
  if (entry < 0) throw new Error(`qless-redis: the script has no entry line "${ENTRY_LINE}"`);
  const name = `switchyard_qless_${scriptSha.slice(0, 16)}`;
  const body = scriptSource.slice(0, entry);
  return { name, source: `#!lua name=${name}\n${body}redis.register_function('${name}', dispatch)\n` };
}

/** Per connection: whether its server has the library (loaded by us or another gateway), or keeps to EVALSHA. */
const loaded = new WeakMap<Redis, Promise<boolean>>();

/**
 * Whether FCALL of `library` works on this connection's server, loading the library the first time.
 * A server that answers FUNCTION with an error (older than Redis 7, a proxy, an ACL without it) is
 * called by EVALSHA from then on; a connection that failed is asked again next time.
 */
export function hasLibrary(redis: Redis, library: QlessLibrary): Promise<boolean> {
  let known = loaded.get(redis);
  if (!known) {
    known = load(redis, library);
    loaded.set(redis, known);
    known.catch(() => loaded.delete(redis));
  }
  return known;
}

/** Forgets what is known of the server (its functions were flushed, or it restarted without them). */
export function forgetLibrary(redis: Redis): void {
  loaded.delete(redis);
}

async function load(redis: Redis, library: QlessLibrary): Promise<boolean> {
  try {
    await redis.call("FUNCTION", "LOAD", library.source);
    return true;
  } catch (error) {
    if (!isReplyError(error)) throw error;
    return /already exists/i.test(error.message);
  }
}

export function isFunctionNotFound(error: unknown): boolean {
  return error instanceof Error && /Function not found/i.test(error.message);
}

/** An error the server answered (as opposed to a connection that failed). */
function isReplyError(error: unknown): error is Error {
  return error instanceof Error && error.name === "ReplyError";
}
