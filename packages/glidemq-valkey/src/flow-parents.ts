import type { QueueKeys } from "./keys.js";
import { KeyspaceWalk, type Walked } from "./keyspace-walk.js";
import { escapeGlob, keysStartingWith, walkKeys } from "./listing.js";
import { type RedisClient, runScript } from "./scripts.js";

/** Each queue's flow parents: the ids of the jobs that have a `deps:<id>` set, from one walk of the keyspace. */
async function parentsByQueue(client: RedisClient, prefix: string): Promise<Map<string, string[]>> {
  const parents = new Map<string, string[]>();
  const queueStart = prefix.length + 2;
  await walkKeys(client, `${escapeGlob(prefix)}:{*}:deps:*`, (key) => {
    const end = key.indexOf("}:deps:", queueStart);
    if (end < 0) return;
    const queue = key.slice(queueStart, end);
    const ids = parents.get(queue) ?? [];
    ids.push(key.slice(end + "}:deps:".length));
    parents.set(queue, ids);
  });
  return parents;
}

/**
 * Keeps `sy:blocked` up to date for counts() and list({state: 'blocked'}). A parent that glide-mq's
 * FlowProducer added is in no index of glide-mq's, so it is found by its `deps:` set: at a queue's first
 * update by a walk of its own (as its first count always found them), and from then on in a walk of
 * the keyspace shared by every queue of the backend (a KeyspaceWalk; each queue counted walked on
 * its own at most every 5 s, on a Redis of a million job hashes 1.3 s of Redis's CPU a queue), indexed
 * once per walk. Parents a glide-mq worker released are dropped from the index on every call. Counts
 * and lists then agree with get().
 */
export class FlowParentIndex {
  readonly #walk: KeyspaceWalk<Map<string, string[]>>;
  /** The shared walk whose parents each queue has indexed (null: its own first walk). */
  readonly #indexed = new Map<string, Walked<Map<string, string[]>> | null>();

  constructor(ready: () => Promise<RedisClient>, prefix: string) {
    this.#walk = new KeyspaceWalk(async () => parentsByQueue(await ready(), prefix));
  }

  /** Brings the queue's index up to date; answers how many of its jobs wait on their children. */
  async update(client: RedisClient, queue: string, keys: QueueKeys): Promise<number> {
    let found: string[] = [];
    if (!this.#indexed.has(queue)) {
      const depsPrefix = keys.deps("");
      found = (await keysStartingWith(client, depsPrefix)).map((key) => key.slice(depsPrefix.length));
      this.#indexed.set(queue, null);
    } else {
      const walked = await this.#walk.read();
      if (this.#indexed.get(queue) !== walked) {
        found = walked.found.get(queue) ?? [];
        this.#indexed.set(queue, walked);
      }
    }
    return Number(await runScript(client, "index-blocked", [keys.blocked], found));
  }
}
