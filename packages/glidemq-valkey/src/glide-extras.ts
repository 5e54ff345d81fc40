import type { GlideMqExtras } from "@switchyard/core";
import { broadcasts } from "./broadcast.js";
import { flatToRecord } from "./codec.js";
import type { QueueKeys } from "./keys.js";
import type { RedisClient } from "./scripts.js";
import { suspensions } from "./suspend.js";
import { usage } from "./usage.js";

/**
 * What glide-mq's workers keep beside a job and its proxy reads (GlideMqExtras): a job's output
 * stream (`jstream:<id>`, written by `job.stream()`), suspensions and signals, usage and budgets,
 * broadcast subscriptions.
 */
export function glideExtras(ready: () => Promise<RedisClient>, keysOf: (queue: string) => QueueKeys, prefix: string): GlideMqExtras {
  return {
    ...suspensions(ready, keysOf),
    ...usage(ready, keysOf, prefix),
    ...broadcasts(ready, keysOf),

    async jobStream(queue, id, after, count) {
      const key = `${keysOf(queue).base}jstream:${id}`;
      const entries = (await (await ready()).xrange(key, after === null ? "-" : `(${after}`, "+", "COUNT", count)) as Array<
        [string, string[]]
      >;
      return entries.map(([entryId, flat]) => ({ id: entryId, fields: flatToRecord(flat) }));
    },
  };
}
