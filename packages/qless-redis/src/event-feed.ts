import type { JobEventFeed, JobEventType, StoreEvent } from "@switchyard/core";
import type { Redis } from "ioredis";

/**
 * qless's `ql:log` channel as a job event feed. qless publishes `put`, `completed`, `advanced`,
 * `failed`, `canceled` and `lock_lost` there for every job (`popped` only for tracked jobs, and no
 * pause, retry or progress), and pub/sub keeps no history: a subscriber hears what happens while it
 * listens, a millisecond or so after it happens.
 */

/** The `ql:log` events that are job events here, and what they are. */
const LOG_EVENT_TYPES: Record<string, JobEventType> = {
  put: "enqueued",
  advanced: "enqueued",
  completed: "completed",
  failed: "failed",
  canceled: "canceled",
  lock_lost: "retrying",
};

interface LogMessage {
  event?: string;
  jid?: string;
  queue?: string;
  /** Where `advanced` moved the job. */
  to?: string;
}

export function qlessEventFeed(redis: Redis): JobEventFeed {
  /** `failed` and `lock_lost` name no queue, and a `put` may have scheduled the job: the job hash says. */
  async function toEvent(message: LogMessage): Promise<StoreEvent | null> {
    let type = LOG_EVENT_TYPES[message.event ?? ""];
    if (!type || !message.jid) return null;
    let queue = message.event === "advanced" ? message.to : message.queue;
    if (message.event !== "completed" && message.event !== "advanced" && message.event !== "canceled") {
      const [storedQueue, state] = await redis.hmget(`ql:j:${message.jid}`, "queue", "state");
      queue ??= storedQueue ?? undefined;
      if (message.event === "put" && state === "scheduled") type = "delayed";
    }
    if (!queue) return null;
    return { type, queue, jobId: message.jid, time: Date.now(), position: null };
  }

  return {
    eventFeed: { mechanism: "SUBSCRIBE ql:log (qless's own log channel)", history: false, everyMove: false, latencyMs: 1 },

    watchEvents(onEvent, options = {}) {
      const subscriber = redis.duplicate();
      // Messages are told in the order they came, though looking a job up takes a round trip.
      let told = Promise.resolve();
      subscriber.on("message", (_channel: string, text: string) => {
        told = told.then(async () => {
          try {
            const event = await toEvent(JSON.parse(text) as LogMessage);
            if (event) onEvent(event);
          } catch (error) {
            options.onError?.(error as Error);
          }
        });
      });
      subscriber.on("error", (error: Error) => options.onError?.(error));
      const subscribed = subscriber.subscribe("ql:log").catch((error: Error) => options.onError?.(error));
      return {
        close: async () => {
          await subscribed;
          subscriber.disconnect();
          await told;
        },
      };
    },
  };
}
