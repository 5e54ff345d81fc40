import type { Backend } from "@switchyard/core";
import { Cluster, type Redis } from "ioredis";
import { queueKeys } from "../../src/keys.js";

/** Records the queue names a backend is asked about, so a test file can remove their keys after. */
export function recordingQueues(backend: Backend, queues: Set<string>): Backend {
  return new Proxy(backend, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (typeof args[0] === "string" && property !== "close") queues.add(args[0]);
        return value.apply(target, args);
      };
    },
  });
}

/** Deletes every key of these queues (the servers are long-lived and shared between test files). */
export async function removeQueues(client: Redis | Cluster, queues: Iterable<string>): Promise<void> {
  const nodes = client instanceof Cluster ? client.nodes("master") : [client];
  for (const queue of queues) {
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
