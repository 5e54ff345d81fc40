import type { QueueKeys } from "./keys.js";
import { CONSUMER_GROUP } from "./keys.js";
import { type RedisClient, runScript } from "./scripts.js";

export interface GlideJobCounts {
  waiting: number;
  active: number;
  delayed: number;
  completed: number;
  failed: number;
}

/**
 * glide-mq's `getJobCounts`: active = pending stream entries + list-active; waiting = unread stream
 * entries + the lifo and priority lists; delayed = everything in `scheduled` (prioritized included).
 */
export async function jobCounts(client: RedisClient, keys: QueueKeys): Promise<GlideJobCounts> {
  const reply = await client
    .multi()
    .xlen(keys.stream)
    .llen(keys.lifo)
    .llen(keys.priority)
    .zcard(keys.scheduled)
    .zcard(keys.completed)
    .zcard(keys.failed)
    .get(keys.listActive)
    .exec();
  const failedRead = reply?.find(([error]) => error)?.[0];
  if (failedRead) throw failedRead;
  const value = (i: number) => Number(reply?.[i]?.[1] ?? 0) || 0;
  let pending = 0;
  try {
    const summary = (await client.xpending(keys.stream, CONSUMER_GROUP)) as [number, ...unknown[]];
    pending = Number(summary[0]) || 0;
  } catch (error) {
    // NOGROUP: no worker has created the group yet; anything else (a lost connection) is an error.
    if (!(error instanceof Error && error.message.startsWith("NOGROUP"))) throw error;
  }
  return {
    waiting: Math.max(0, value(0) - pending) + value(1) + value(2),
    active: pending + Math.max(0, value(6)),
    delayed: value(3),
    completed: value(4),
    failed: value(5),
  };
}

/** glide-mq's `Queue.pause()` / `resume()`: meta.paused and a queue event with jobId "0". */
export async function setPaused(client: RedisClient, keys: QueueKeys, paused: boolean): Promise<void> {
  await runScript(client, "pause", [keys.meta, keys.events], [paused ? "1" : "0"]);
}

export async function isPaused(client: RedisClient, keys: QueueKeys): Promise<boolean> {
  return (await client.hget(keys.meta, "paused")) === "1";
}
