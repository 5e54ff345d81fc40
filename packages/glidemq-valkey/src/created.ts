import type { AddedSnapshot } from "./glide-functions.js";
import { PRIORITY_SHIFT } from "./keys.js";

/**
 * A number as Lua's `tostring(tonumber(text))` writes it, where that is the text itself: a
 * non-negative integer below 10^14 (Lua formats numbers with "%.14g"). Anything else is left to Redis.
 */
const LUA_INTEGER = /^(0|[1-9]\d{0,13})$/;

/**
 * The job add.lua's createJob writes for these add arguments (producer.ts's prepare) and id, as an
 * HGETALL of it would read right after (fields in HSET order), with its `scheduled` score: so that
 * the script need not read each new hash back and return it. Undefined for a job with dependencies,
 * or numbers Lua would write in another form; those come back from the script itself.
 */
export function createdSnapshot(args: readonly string[], id: string): AddedSnapshot | undefined {
  const [name, data, opts, timestamp, delay, priority, maxAttempts, ttl, , lifo, , extra, , , , dependsOn] = args as string[];
  if (dependsOn !== "") return undefined;
  for (const value of [timestamp, delay, priority, maxAttempts, ttl]) if (!LUA_INTEGER.test(value as string)) return undefined;
  const at = Number(timestamp);
  const expireAt = at + Number(ttl);
  if (expireAt >= 1e14) return undefined;
  const fields = ["id", id, "name", name, "data", data, "opts", opts, "timestamp", timestamp, "attemptsMade", "0"];
  fields.push("delay", delay as string, "priority", priority as string, "maxAttempts", maxAttempts as string);
  if (Number(ttl) > 0) fields.push("expireAt", String(expireAt));
  if (lifo === "1") fields.push("lifo", "1");
  const delayed = Number(delay) > 0;
  fields.push("state", delayed ? "delayed" : Number(priority) > 0 ? "prioritized" : "waiting");
  if (extra) {
    // An HSET of a field already named above leaves it in its place with the later value, as
    // flatToRecord reads duplicates.
    for (const [field, value] of Object.entries(JSON.parse(extra) as Record<string, unknown>)) {
      if (typeof value !== "string") return undefined;
      fields.push(field, value);
    }
  }
  const score = delayed ? String(Number(priority) * PRIORITY_SHIFT + at + Number(delay)) : null;
  return { fields: fields as string[], score, deps: [] };
}
