import { type JobLookup, groupCommit, luaScript, runLuaScript } from "@switchyard/core";
import type { QueueKeys } from "./keys.js";
import type { QueueDirectory } from "./queue-directory.js";
import { type RedisClient, isCluster } from "./scripts.js";

/**
 * Which job hashes exist, for ARGV = the number of queues, each queue's job-key prefix, then the ids:
 * their positions from 1, id by id, each id's queues in order. The keys go by their parts, not whole
 * as KEYS: a call asks ids x queues of them (50 puts and 30 queues: 1,500), and sending each whole
 * cost this process and Redis more than the look-ups themselves. An id's keys are asked first in
 * one EXISTS (by 1,000: Lua unpacks at most about 8,000 values), and one by one only when it counts
 * some: a put's jid is mostly new. A standalone server only; on a cluster the hashes live on
 * several nodes.
 */
const EXISTING_JOBS = luaScript(`
local queues = tonumber(ARGV[1])
local found = {}
for i = queues + 2, #ARGV do
  local keys, any = {}, false
  for q = 1, queues do keys[q] = ARGV[q + 1] .. ARGV[i] end
  for first = 1, queues, 1000 do
    any = any or redis.call('EXISTS', unpack(keys, first, math.min(queues, first + 999))) > 0
  end
  if any then
    for q = 1, queues do
      if redis.call('EXISTS', keys[q]) == 1 then found[#found + 1] = (i - queues - 2) * queues + q end
    end
  end
end
return found`);

/** Bounds one script call's KEYS (ids x queues) when look-ups go together. */
const MAX_GROUP_KEYS = 10_000;

/**
 * Which queues hold a job id (core's JobLookup), for qless's global jids through the doors: a put of a
 * jid another queue holds moves that job. glide-mq keeps ids per queue and no list of its queues, so
 * naming them all is a walk of the whole keyspace, far too much for every put. A lookup looks in the
 * queues this backend has used and in those the backend's QueueDirectory names (its last walk, while
 * that serves): one EXISTS of the job hash per queue, all in one script call (on a cluster, where the
 * hashes live on several nodes, one EXISTS each, sent together). A queue that another process made
 * since that walk, and this one has not used, is looked in after the next. Look-ups that arrive while one is in flight go together
 * in the next call (a qless door asks on every put: under load each put would otherwise pay a
 * script call and a round trip of its own), each answered with its own id's queues.
 */
export function glideJobLookup(ready: () => Promise<RedisClient>, directory: QueueDirectory, keysOf: (queue: string) => QueueKeys) {
  const used = new Set<string>();
  /** Queues looked in last time, which bounds how many ids the next call takes (MAX_GROUP_KEYS). */
  let lastQueueCount = 1;

  /**
   * The queues to look in, in name order, with each one's job-key prefix: made again only when the
   * directory's names or the queues this backend uses change, not for every call (with hundreds of
   * queues, building every queue's keys and sorting the names took most of a call's CPU).
   */
  let known: { from: readonly string[]; used: number; queues: string[]; jobPrefixes: string[] } | null = null;
  const knownQueues = async () => {
    const names = await directory.names();
    if (known?.from !== names || known.used !== used.size) {
      const queues = [...new Set([...names, ...used])].sort();
      known = { from: names, used: used.size, queues, jobPrefixes: queues.map((queue) => keysOf(queue).job("")) };
    }
    return known;
  };

  /** For each id, the queues (in name order) whose hash of that id exists. */
  const holdingEach = async (ids: string[]): Promise<string[][]> => {
    const client = await ready();
    const { queues, jobPrefixes } = await knownQueues();
    lastQueueCount = queues.length;
    const held = isCluster(client)
      ? (await Promise.all(ids.flatMap((id) => jobPrefixes.map((jobPrefix) => client.exists(jobPrefix + id))))).flatMap((exists, i) =>
          exists === 1 ? [i + 1] : [],
        )
      : ((await runLuaScript(client, EXISTING_JOBS, [], [queues.length, ...jobPrefixes, ...ids])) as number[]);
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
