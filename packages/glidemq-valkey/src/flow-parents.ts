import type { QueueKeys } from "./keys.js";
import { keysStartingWith } from "./listing.js";
import { type RedisClient, runScript } from "./scripts.js";

/** A SCAN for new flow parents runs at most this often per queue and process: it walks the keyspace. */
const DISCOVERY_INTERVAL_MS = 5_000;
const lastDiscovery = new Map<string, number>();

/** Ids of the jobs that have a `deps:<id>` set, i.e. that are (or were) a flow's parent. */
async function parentIds(client: RedisClient, keys: QueueKeys): Promise<string[]> {
  const depsPrefix = keys.deps("");
  return (await keysStartingWith(client, depsPrefix)).map((key) => key.slice(depsPrefix.length));
}

/**
 * Brings `sy:blocked` up to date and answers how many jobs wait on their children. A parent that
 * glide-mq's FlowProducer added is in no index of glide-mq's, so it is found by its `deps:` set (a
 * SCAN, at most every DISCOVERY_INTERVAL_MS per queue) and indexed; parents a glide-mq worker
 * released are dropped from the index on every call. Counts and lists then agree with get().
 */
export async function indexBlocked(client: RedisClient, keys: QueueKeys): Promise<number> {
  const last = lastDiscovery.get(keys.base) ?? 0;
  const now = Date.now();
  let found: string[] = [];
  if (now - last >= DISCOVERY_INTERVAL_MS) {
    found = await parentIds(client, keys);
    lastDiscovery.set(keys.base, now);
  }
  return Number(await runScript(client, "index-blocked", [keys.blocked], found));
}
