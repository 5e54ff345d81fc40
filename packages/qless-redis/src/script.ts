import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { QlessCommandError, type QlessReply } from "@switchyard/core";
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

let cached: { source: string; sha: string } | undefined;

/** The assembled script and its SHA-1, as SCRIPT LOAD would report it. */
export function qlessScript(): { source: string; sha: string } {
  if (!cached) {
    const source = qlessScriptSource();
    cached = { source, sha: createHash("sha1").update(source).digest("hex") };
  }
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

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/**
 * Runs one qless command: EVALSHA with the SCRIPT LOAD fallback on NOSCRIPT, as the Ruby client
 * does. `now` is epoch seconds (a float is fine), sent in plain decimal notation.
 */
export async function callQless(redis: Redis, command: string, now: number | string, ...args: (string | number)[]): Promise<QlessReply> {
  return callQlessRaw(redis, [command, typeof now === "number" ? formatNow(now) : now, ...args.map(String)]);
}

/** Sends an argument list exactly as given (command, now, args), even an incomplete one. */
export async function callQlessRaw(redis: Redis, argv: string[]): Promise<QlessReply> {
  const { source, sha } = qlessScript();
  const command = argv[0] ?? "";
  try {
    try {
      return (await redis.evalsha(sha, 0, ...argv)) as QlessReply;
    } catch (error) {
      if (!isNoScript(error)) throw error;
      await redis.script("LOAD", source);
      return (await redis.evalsha(sha, 0, ...argv)) as QlessReply;
    }
  } catch (error) {
    if (error instanceof Error && !isNoScript(error) && /^ERR |user_script/.test(error.message)) {
      throw new QlessScriptError(command, qlessErrorMessage(error.message), { cause: error });
    }
    throw error;
  }
}

/** Epoch seconds without exponent notation, as qless clients send them. */
export function formatNow(seconds: number): string {
  return Number.isInteger(seconds) ? String(seconds) : seconds.toFixed(6).replace(/0+$/, "");
}
