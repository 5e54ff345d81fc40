import type { GlideMqBroadcastMessage, GlideMqExtras } from "@switchyard/core";
import { flatToRecord, parseStored } from "./codec.js";
import type { QueueKeys } from "./keys.js";
import { type RedisClient, runScript } from "./scripts.js";

/*
 * glide-mq's broadcast (Broadcast / BroadcastWorker): a message is a job of the broadcast's queue
 * (its name the subject), and each subscription is a consumer group of the queue's stream, created
 * at the stream's end, reading every entry on its own; entries are acknowledged, never deleted.
 */

type Broadcasts = Pick<GlideMqExtras, "subscribe" | "receiveBroadcast">;

export function broadcasts(ready: () => Promise<RedisClient>, keysOf: (queue: string) => QueueKeys): Broadcasts {
  const subscribe = async (queue: string, subscription: string) => {
    try {
      await (await ready()).xgroup("CREATE", keysOf(queue).stream, subscription, "$", "MKSTREAM");
    } catch (error) {
      if (!(error instanceof Error && error.message.startsWith("BUSYGROUP"))) throw error;
    }
  };

  return {
    subscribe,

    async receiveBroadcast(queue, subscription, consumer, count) {
      const redis = await ready();
      const keys = keysOf(queue);
      // No BLOCK: the store's connection is shared; the caller polls.
      const read = () => redis.xreadgroup("GROUP", subscription, consumer, "COUNT", count, "STREAMS", keys.stream, ">");
      const reply = (await read().catch(async (error: Error) => {
        // The group was removed under the subscriber: made again at the end, as a new subscriber's.
        if (!error.message.startsWith("NOGROUP")) throw error;
        await subscribe(queue, subscription);
        return read();
      })) as Array<[string, Array<[string, string[]]>]> | null;
      const messages: GlideMqBroadcastMessage[] = [];
      for (const [entryId, flat] of reply?.[0]?.[1] ?? []) {
        const entry = flatToRecord(flat);
        if (!entry.jobId) continue;
        if (entry.retryGroup && entry.retryGroup !== subscription) {
          // Another subscription's retry of a message: not this one's.
          await redis.xack(keys.stream, subscription, entryId);
          continue;
        }
        const activated = await runScript(
          redis,
          "broadcast-deliver",
          [keys.stream, keys.job(entry.jobId), keys.completed, keys.events, keys.metricsCompleted],
          [entry.jobId, entryId, subscription, Date.now()],
        );
        const job = flatToRecord(activated);
        if (!job.name && !job.timestamp) continue;
        messages.push({ id: entry.jobId, subject: job.name ?? "", data: parseStored(job.data), timestamp: Number(job.timestamp ?? 0) });
      }
      return messages;
    },
  };
}
