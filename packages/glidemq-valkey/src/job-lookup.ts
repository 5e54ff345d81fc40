import { type JobLookup, groupCommit, luaScript, runLuaScript } from "@switchyard/core";
import type { QueueKeys } from "./keys.js";
import { queueNames } from "./listing.js";
import { type RedisClient, isCluster } from "./scripts.js";

/** The positions (from 1) of the KEYS that exist, in order. */
const EXISTING_KEYS = luaScript(
  "local found = {} for i, key in ipairs(KEYS) do if redis.call('EXISTS', key) == 1 then found[#found + 1] = i end end return found",
);

/** How long the keyspace's queue names are taken as known before a lookup scans for them again. */
const QUEUE_NAMES_TTL_MS = 10_000;

/** Bounds one script call's KEYS (ids x queues) when look-ups go together. */
const MAX_GROUP_KEYS = 10_000;

/**
 * Which queues hold a job id (core's JobLookup), for qless's global jids through the doors: a put of a
 * jid another queue holds moves that job. glide-mq keeps ids per queue and no list of its queues, so
 * naming them all is a SCAN of the whole keyspace (queueNames): tens of milliseconds of Redis at
 * 100,000 keys, far too much for every put. A lookup looks in the queues this backend has used and in
 * those the keyspace held at its last scan, made at most every QUEUE_NAMES_TTL_MS: one EXISTS of the
 * job hash per queue, all in one script call (on a cluster, where the hashes live on several nodes,
 * one EXISTS each, sent together). A queue that another process made since that scan, and this one
 * has not used, is looked in after the next. Look-ups that arrive while one is in flight go together
 * in the next call (a qless door asks on every put: under load each put would otherwise pay a
 * script call and a round trip of its own), each answered with its own id's queues.
 */
export function glideJobLookup(ready: () => Promise<RedisClient>, prefix: string, keysOf: (queue: string) => QueueKeys) {
  const used = new Set<string>();
  let scanned: { at: number; names: Promise<string[]> } | null = null;
  /** Queues looked in last time, which bounds how many ids the next call takes (MAX_GROUP_KEYS). */
  let lastQueueCount = 1;

  const knownQueues = async (client: RedisClient): Promise<string[]> => {
    if (scanned === null || Date.now() - scanned.at > QUEUE_NAMES_TTL_MS) {
      const names = queueNames(client, prefix);
      scanned = { at: Date.now(), names };
      // A failed scan is not kept: the next lookup scans again.
      names.catch(() => {
        scanned = null;
      });
    }
    return [...new Set([...(await scanned.names), ...used])].sort();
  };

  /** For each id, the queues (in name order) whose hash of that id exists. */
  const holdingEach = async (ids: string[]): Promise<string[][]> => {
    const client = await ready();
    const queues = await knownQueues(client);
    lastQueueCount = queues.length;
    // Each queue's keys once per call: a call asks ids x queues keys, and building a queue's keys
    // (twenty texts and a name check) for each of them cost more of the gateway than the call itself.
    const queueKeySets = queues.map(keysOf);
    const keys = ids.flatMap((id) => queueKeySets.map((queueKeys) => queueKeys.job(id)));
    const held = isCluster(client)
      ? (await Promise.all(keys.map((key) => client.exists(key)))).flatMap((exists, i) => (exists === 1 ? [i + 1] : []))
      : ((await runLuaScript(client, EXISTING_KEYS, keys, [])) as number[]);
    const answers = ids.map((): string[] => []);
    // Positions run in key order: id by id, each id's queues in name order.
    for (const position of held) {
      answers[Math.floor((position - 1) / queues.length)]?.push(queues[(position - 1) % queues.length] as string);
    }
    return answers;
  };
  const lookUp = groupCommit((_key, ids: string[]) => holdingEach(ids), {
    take: (waiting) => Math.min(waiting.length, Math.floor(MAX_GROUP_KEYS / Math.max(1, lastQueueCount))),
  });

  return {
    /** Notes a queue this backend works on, so lookups look in it at once. */
    use(queue: string): void {
      used.add(queue);
    },
    queuesHolding: (id: string): Promise<string[]> => lookUp("", id),
  } satisfies JobLookup & { use(queue: string): void };
}
