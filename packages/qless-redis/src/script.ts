import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type LuaScript, QlessCommandError, type QlessReply, isNoScriptError, luaScript, runLuaScript } from "@switchyard/core";
import type { Redis } from "ioredis";

const HERE = dirname(fileURLToPath(import.meta.url));
// src/lua next to this file in the workspace; from dist/ (published build) the shipped src/lua.
const LUA_DIR = [join(HERE, "lua"), join(HERE, "..", "src", "lua")].find((dir) => existsSync(dir)) ?? join(HERE, "lua");

/**
 * The qless command script: every src/lua/*.lua file, in file-name order, joined into one chunk.
 * Like qless.lua it is called as `EVALSHA <sha> 0 <command> <now> ...args`, so any qless client
 * (or qless-core's own test suite) can load this text in place of qless.lua.
 */
export function qlessScriptSource(): string {
  const files = readdirSync(LUA_DIR)
    .filter((name) => name.endsWith(".lua"))
    .sort();
  return files.map((name) => readFileSync(join(LUA_DIR, name), "utf8")).join("\n");
}

let cached: LuaScript | undefined;

/** The assembled script and its SHA-1, as SCRIPT LOAD would report it. */
export function qlessScript(): LuaScript {
  cached ??= luaScript(qlessScriptSource());
  return cached;
}

/** A script error with the message qless wrote (Redis's `ERR user_script:N:` wrapping removed). */
export class QlessScriptError extends QlessCommandError {
  constructor(command: string, message: string, options?: ErrorOptions) {
    super(command, message, options);
    this.name = "QlessScriptError";
  }
}

/** Strips the wrapping Redis 7 puts around a Lua error, leaving qless's own message. */
export function qlessErrorMessage(raw: string): string {
  let message = raw.replace(/^ERR /, "");
  message = message.replace(/ script: [0-9a-f]{40}, on @user_script:\d+\.$/, "");
  message = message.replace(/^user_script:\d+: /, "");
  return message;
}

/** Runs one qless command. `now` is epoch seconds (a float is fine), sent in plain decimal notation. */
export async function callQless(redis: Redis, command: string, now: number | string, ...args: (string | number)[]): Promise<QlessReply> {
  return callQlessRaw(redis, [command, typeof now === "number" ? formatNow(now) : now, ...args.map(String)]);
}

/** Sends an argument list exactly as given (command, now, args), even an incomplete one. */
export async function callQlessRaw(redis: Redis, argv: string[]): Promise<QlessReply> {
  try {
    return (await runLuaScript(redis, qlessScript(), [], argv)) as QlessReply;
  } catch (error) {
    if (error instanceof Error && !isNoScriptError(error) && /^ERR |user_script/.test(error.message)) {
      throw new QlessScriptError(argv[0] ?? "", qlessErrorMessage(error.message), { cause: error });
    }
    throw error;
  }
}

/** Epoch seconds without exponent notation, as qless clients send them. */
export function formatNow(seconds: number): string {
  return Number.isInteger(seconds) ? String(seconds) : seconds.toFixed(6).replace(/0+$/, "");
}
