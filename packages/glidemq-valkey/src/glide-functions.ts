import { ValidationError } from "@switchyard/core";
import type { QueueKeys } from "./keys.js";
import type { RedisClient } from "./scripts.js";

/** What one add came to: created, or skipped (deduplicated) or a duplicate of an existing id. */
/** The job as an add left it: its flat hash, `scheduled` score and deps members (read in the same call). */
export interface AddedSnapshot {
  fields: string[];
  score: string | null;
  deps: string[];
}

export type AddOutcome = { status: "created" | "skipped" | "duplicate"; id: string; snapshot?: AddedSnapshot };

/** The glide-mq function library version whose argument layouts this file follows (glide-mq 0.15.4). */
export const GLIDE_LIBRARY_VERSION = "93";

/**
 * Whether glide-mq's own `glidemq` library, at the version we know, is loaded where this queue lives.
 * The queue's `id` key routes the call to the queue's node in a cluster.
 */
export async function glideLibraryLoaded(client: RedisClient, keys: QueueKeys): Promise<boolean> {
  try {
    return String(await client.fcall("glidemq_version", 1, keys.id)) === GLIDE_LIBRARY_VERSION;
  } catch {
    return false; // "Function not found": the library is not loaded
  }
}

/**
 * One add through glide-mq's documented `FCALL glidemq_addJob` / `glidemq_dedup`, from the 16
 * arguments add.lua takes (see producer.ts). Only for jobs without Switchyard's own fields or
 * dependencies; ordering, cost and flows stay unset, as this adapter does not offer them.
 */
export async function addThroughGlide(client: RedisClient, keys: QueueKeys, args: string[]): Promise<AddOutcome> {
  const [name, data, opts, timestamp, delay, priority, maxAttempts, ttl, customId, lifo, skipEvents, , dedupId, dedupTtl, dedupMode] =
    args as [string, string, string, string, string, string, string, string, string, string, string, string, string, string, string];
  // name, data, opts, ts, delay, priority, parentId, maxAttempts, orderingKey, groupConcurrency,
  // groupRateMax, groupRateDuration, tbCapacity, tbRefillRate, cost, ttl, customJobId
  const common = [name, data, opts, timestamp, delay, priority, "", maxAttempts, "", "0", "0", "0", "0", "0", "0", ttl, customId];
  let reply: string;
  if (dedupId === "") {
    const argv = [...common, lifo, "", "", skipEvents];
    reply = String(await client.fcall("glidemq_addJob", 4, keys.id, keys.stream, keys.scheduled, keys.events, ...argv));
  } else {
    const argv = [dedupId, dedupTtl, dedupMode, ...common, lifo, "", skipEvents];
    reply = String(await client.fcall("glidemq_dedup", 5, keys.dedup, keys.id, keys.stream, keys.scheduled, keys.events, ...argv));
  }
  if (reply === "duplicate") return { status: "duplicate", id: customId };
  if (reply === "skipped") {
    const record = (await client.hget(keys.dedup, dedupId)) ?? "";
    return { status: "skipped", id: record.slice(0, record.indexOf(":")) };
  }
  // glide-mq's addJob answers ERR:<reason> for a job its rules refuse (options, ids): the caller's input.
  if (reply.startsWith("ERR:")) throw new ValidationError(`glidemq-valkey: glide-mq refused the job: ${reply}`, { reply });
  return { status: "created", id: reply };
}
