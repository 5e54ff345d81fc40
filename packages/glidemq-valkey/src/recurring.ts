import { type Recurrence, type RecurringJobs, byNextRun } from "@switchyard/core";
import type { ChainableCommander } from "ioredis";
import { queueKeys, recurrenceKey, validateJobId } from "./keys.js";
import { type RedisClient, runScript } from "./scripts.js";

/*
 * Recurring jobs' definitions (core's RecurringJobs; qless's `recur` on a glide-mq store). glide-mq
 * has no such structure, so these are Switchyard's own keys beside its layout, which its workers and
 * producers never read; they are not glide-mq's job schedulers (`schedulers`), whose due entries a
 * glide-mq worker would fire as jobs of its own, where a recurring job's instances are added by the
 * qless doors alone.
 *
 * One hash per definition, `<prefix>:sy:recurring:{<id>}` (recurrenceKey: ids are the store's, not a
 * queue's), and per queue the sorted set `<prefix>:{<queue>}:sy:recurring` of its ids, scored by next
 * run. On a cluster the two are in different slots, so no write covers both: the hash is what counts,
 * and the writes go in an order after which the queue a hash names lists its id, whatever fails or
 * runs meanwhile. An index entry may outlive its definition or name an old queue; listing skips those.
 */

/** The hash fields; numbers as JS writes them (String), which Number() reads back exactly, fractions included. */
function toHash(recurrence: Recurrence): Record<string, string> {
  return {
    queue: recurrence.queue,
    name: recurrence.name,
    data: JSON.stringify(recurrence.data),
    priority: String(recurrence.priority),
    tags: JSON.stringify(recurrence.tags),
    maxAttempts: String(recurrence.maxAttempts),
    intervalMs: String(recurrence.intervalMs),
    nextAt: String(recurrence.nextAt),
    count: String(recurrence.count),
    backlog: String(recurrence.backlog),
    native: JSON.stringify(recurrence.native),
  };
}

function fromHash(id: string, hash: Record<string, string>): Recurrence {
  return {
    id,
    queue: hash.queue as string,
    name: hash.name as string,
    data: JSON.parse(hash.data as string),
    priority: Number(hash.priority),
    tags: JSON.parse(hash.tags as string),
    maxAttempts: Number(hash.maxAttempts),
    intervalMs: Number(hash.intervalMs),
    nextAt: Number(hash.nextAt),
    count: Number(hash.count),
    backlog: Number(hash.backlog),
    native: JSON.parse(hash.native as string),
  };
}

/** The replies of a MULTI, each command's error thrown. */
async function replies(transaction: ChainableCommander): Promise<unknown[]> {
  const results = (await transaction.exec()) ?? [];
  const failed = results.find(([error]) => error)?.[0];
  if (failed) throw failed;
  return results.map(([, reply]) => reply);
}

export function glideRecurringJobs(ready: () => Promise<RedisClient>, prefix: string) {
  const indexOf = (queue: string) => queueKeys(queue, prefix).recurring;
  const keyOf = (id: string) => recurrenceKey(id, prefix);

  /** Lists the id in the queue its definition names now (after a ZREM that a put moving it back may have raced). */
  async function relist(redis: RedisClient, id: string): Promise<void> {
    const [queue, nextAt] = await redis.hmget(keyOf(id), "queue", "nextAt");
    if (typeof queue === "string" && typeof nextAt === "string") await redis.zadd(indexOf(queue), nextAt, id);
  }

  return {
    async putRecurrence(recurrence: Recurrence) {
      // Its instances `<id>-<n>` become jobs of this store: an id glide-mq cannot hold is refused now, not at every pop.
      validateJobId(recurrence.id);
      const index = indexOf(recurrence.queue);
      const key = keyOf(recurrence.id);
      const redis = await ready();
      const nextAt = String(recurrence.nextAt);
      // Listed before the hash names the queue, so a failure before the next step leaves no definition unlisted.
      await redis.zadd(index, nextAt, recurrence.id);
      const [was] = await replies(redis.multi().hget(key, "queue").del(key).hset(key, toHash(recurrence)));
      // Listed again after: a put moving it away meanwhile may have taken the first entry out (below).
      await redis.zadd(index, nextAt, recurrence.id);
      if (typeof was !== "string" || was === recurrence.queue) return;
      await redis.zrem(indexOf(was), recurrence.id);
      await relist(redis, recurrence.id);
    },

    async recurrence(id: string) {
      const hash = await (await ready()).hgetall(keyOf(id));
      return hash.queue === undefined ? null : fromHash(id, hash);
    },

    async recurrences(queue: string) {
      const redis = await ready();
      const ids = await redis.zrange(indexOf(queue), 0, -1);
      // One read per definition: on a cluster each hash is in a slot of its own, so no pipeline.
      const hashes = await Promise.all(ids.map((id) => redis.hgetall(keyOf(id))));
      // Ordered by the definitions, not the index scores, which may trail an advance that failed halfway.
      return hashes.flatMap((hash, i) => (hash.queue === queue ? [fromHash(ids[i] as string, hash)] : [])).sort(byNextRun);
    },

    async removeRecurrence(id: string) {
      const redis = await ready();
      const key = keyOf(id);
      const [queue, deleted] = await replies(redis.multi().hget(key, "queue").del(key));
      if (typeof queue === "string") await redis.zrem(indexOf(queue), id);
      return deleted === 1;
    },

    async advanceRecurrence(id: string, seen: number, count: number, nextAt: number) {
      const redis = await ready();
      const queue = await runScript(redis, "advance-recurrence", [keyOf(id)], [String(seen), String(count), String(nextAt)]);
      if (typeof queue !== "string") return false;
      // XX: an entry a move or removal took out meanwhile is not put back.
      await redis.zadd(indexOf(queue), "XX", String(nextAt), id);
      return true;
    },
  } satisfies RecurringJobs;
}
