// What @switchyard/conformance (and any test of a store shared with qless) reads natively.
import type { Probe } from "@switchyard/core";
import type { Redis } from "ioredis";

/** The queue a qless job hash belongs to, read the way qless keeps it (completed jobs: last put). */
export async function queueOf(redis: Redis, jid: string): Promise<string | null> {
  const queue = await redis.hget(`ql:j:${jid}`, "queue");
  if (queue === null) return null;
  if (queue !== "") return queue;
  const imported = await redis.hget(`ql:j:${jid}`, "switchyard.queue");
  if (imported) return imported;
  const history = (await redis.lrange(`ql:j:${jid}-history`, 0, -1)).map((entry) => JSON.parse(entry));
  const lastPut = history.filter((entry) => entry[1] === "put").at(-1);
  return lastPut?.[2]?.q ?? null;
}

/** The conformance probe: the `ql:j:<jid>` hashes as qless workers read them, never through the adapter. */
export function qlessProbe(redis: Redis): Probe {
  return {
    // The `state` field of the ql:j:<jid> hash, as qless workers read it.
    async nativeState(queue, id) {
      if ((await queueOf(redis, id)) !== queue) return null;
      return redis.hget(`ql:j:${id}`, "state");
    },
    async countJobs(queue) {
      const keys = (await redis.keys("ql:j:*")).filter((key) => !/-(history|dependencies|dependents)$/.test(key));
      let count = 0;
      for (const key of keys) if ((await queueOf(redis, key.slice("ql:j:".length))) === queue) count++;
      return count;
    },
    expectedStates: {
      waiting: ["waiting"],
      delayed: ["scheduled"],
      active: ["running"],
      completed: ["complete"],
      failed: ["failed"],
      blocked: ["depends"],
      canceled: [null],
    },
  };
}
