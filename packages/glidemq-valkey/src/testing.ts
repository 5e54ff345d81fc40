// What @switchyard/conformance (and any test of a store shared with glide-mq) reads natively.
import type { Probe } from "@switchyard/core";
import { Cluster, type Redis } from "ioredis";
import { queueKeys } from "./keys.js";

/**
 * Reads glide-mq's keys directly: the `state` field of `glide:{q}:job:<id>`, and the job hashes a
 * queue has (SCAN on every primary of a cluster, since the probe does not trust the adapter's routing).
 */
export function glideProbe(client: Redis | Cluster): Probe {
  return {
    async nativeState(queue, id) {
      return client.hget(queueKeys(queue).job(id), "state");
    },
    async countJobs(queue) {
      const nodes = client instanceof Cluster ? client.nodes("master") : [client];
      let count = 0;
      for (const node of nodes) {
        let cursor = "0";
        do {
          const [next, keys] = await node.scan(cursor, "MATCH", `${queueKeys(queue).base}job:*`, "COUNT", 1000);
          cursor = next;
          count += keys.length;
        } while (cursor !== "0");
      }
      return count;
    },
    expectedStates: {
      waiting: ["waiting", "prioritized"],
      delayed: ["delayed"],
      active: ["active"],
      completed: ["completed", null],
      failed: ["failed"],
      canceled: ["failed", null],
      blocked: ["waiting-children"],
    },
  };
}
