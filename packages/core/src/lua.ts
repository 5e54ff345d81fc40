import { createHash } from "node:crypto";

/** A Lua script as Redis knows it: its text, and the SHA-1 that EVALSHA names it by. */
export interface LuaScript {
  readonly source: string;
  readonly sha: string;
}

export function luaScript(source: string): LuaScript {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

type ScriptArgument = string | number;

/** What a script runner needs of a Redis client; ioredis's `Redis` and `Cluster` both fit. */
export interface ScriptClient {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: ScriptArgument[]): Promise<unknown>;
  eval(source: string, numKeys: number, ...keysAndArgs: ScriptArgument[]): Promise<unknown>;
}

export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/**
 * EVALSHA, and EVAL when the server has lost its script cache (a restart, SCRIPT FLUSH, a failover
 * to a replica that never saw SCRIPT LOAD). EVAL caches the script again, so later calls stay on EVALSHA.
 */
export async function runLuaScript(
  client: ScriptClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly ScriptArgument[],
): Promise<unknown> {
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!isNoScriptError(error)) throw error;
    return client.eval(script.source, keys.length, ...keys, ...args);
  }
}
