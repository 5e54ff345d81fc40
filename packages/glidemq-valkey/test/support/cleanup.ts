import type { Backend } from "@switchyard/core";
import { Cluster, type Redis } from "ioredis";
import { queueKeys, recurrenceKey } from "../../src/keys.js";

/** Records the queue names a backend is asked about, so a test file can remove their keys after. */
export function recordingQueues(backend: Backend, queues: Set<string>): Backend {
  return new Proxy(backend, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (typeof args[0] === "string" && property !== "close") queues.add(args[0]);
        // A recurrence names its queue inside: that queue's index leads to its definition's key.
        if (property === "putRecurrence") queues.add(String((args[0] as { queue?: unknown }).queue));
        return value.apply(target, args);
      };
    },
  });
}

/**
 * Deletes every key of these queues (the servers are long-lived and shared between test files), and
 * the recurring jobs' definitions they list, whose keys are outside the queue's (recurring.ts).
 */
export async function removeQueues(client: Redis | Cluster, queues: Iterable<string>): Promise<void> {
  const nodes = client instanceof Cluster ? client.nodes("master") : [client];
  for (const queue of queues) {
    for (const id of await client.zrange(queueKeys(queue).recurring, 0, -1)) await client.unlink(recurrenceKey(id));
    for (const node of nodes) {
      let cursor = "0";
      do {
        const [next, keys] = await node.scan(cursor, "MATCH", `${queueKeys(queue).base}*`, "COUNT", 1000);
        cursor = next;
        if (keys.length > 0) await node.unlink(...keys);
      } while (cursor !== "0");
    }
  }
}
