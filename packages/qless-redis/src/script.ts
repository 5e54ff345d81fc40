import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type LuaScript, QlessCommandError, type QlessReply, isNoScriptError, luaScript, runLuaScript } from "@switchyard/core";
import type { Redis } from "ioredis";
import { type QlessLibrary, forgetLibrary, hasLibrary, isFunctionNotFound, qlessLibraryOf } from "./library.js";

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

let cachedLibrary: QlessLibrary | undefined;

/** The same commands as a function library (library.ts), which the adapter calls with FCALL. */
export function qlessLibrary(): QlessLibrary {
  const script = qlessScript();
  cachedLibrary ??= qlessLibraryOf(script.source, script.sha);
  return cachedLibrary;
}

/** A script error with the message qless wrote (Redis's `ERR user_script:N:` wrapping removed). */
export class QlessScriptError extends QlessCommandError {
  constructor(command: string, message: string, options?: ErrorOptions) {
    super(command, message, options);
    this.name = "QlessScriptError";
  }
}

/** Strips the wrapping Redis 7 puts around a Lua error (of a script or a library), leaving qless's own message. */
export function qlessErrorMessage(raw: string): string {
  let message = raw.replace(/^ERR /, "");
  message = message.replace(/ script: [\w-]+, on @user_(script|function):\d+\.$/, "");
  message = message.replace(/^user_(script|function):\d+: /, "");
  return message;
}

/** Runs one qless command. `now` is epoch seconds (a float is fine), sent in plain decimal notation. */
export async function callQless(redis: Redis, command: string, now: number | string, ...args: (string | number)[]): Promise<QlessReply> {
  return callQlessRaw(redis, [command, typeof now === "number" ? formatNow(now) : now, ...args.map(String)]);
}

/** Sends an argument list exactly as given (command, now, args), even an incomplete one. */
export async function callQlessRaw(redis: Redis, argv: string[]): Promise<QlessReply> {
  try {
    return (await runQless(redis, argv)) as QlessReply;
  } catch (error) {
    if (error instanceof Error && !isNoScriptError(error) && /^ERR |user_script|user_function/.test(error.message)) {
      throw new QlessScriptError(argv[0] ?? "", qlessErrorMessage(error.message), { cause: error });
    }
    throw error;
  }
}

/**
 * FCALL of the library where the server has it (loaded on first use; loaded again once when the
 * server lost it: a restart without persistence, FUNCTION FLUSH), else EVALSHA of the script.
 */
async function runQless(redis: Redis, argv: string[]): Promise<unknown> {
  const library = qlessLibrary();
  for (let attempt = 0; attempt < 2 && (await hasLibrary(redis, library)); attempt++) {
    try {
      return await redis.call("FCALL", library.name, 0, ...argv);
    } catch (error) {
      if (!isFunctionNotFound(error)) throw error;
      forgetLibrary(redis);
    }
  }
  return runLuaScript(redis, qlessScript(), [], argv);
}

/** Epoch seconds without exponent notation, as qless clients send them. */
export function formatNow(seconds: number): string {
  return Number.isInteger(seconds) ? String(seconds) : seconds.toFixed(6).replace(/0+$/, "");
}
