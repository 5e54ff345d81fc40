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

/** Every move this feed can tell: what ql:log says, a put read as delayed when its job is scheduled. */
const TOLD: ReadonlySet<JobEventType> = new Set([...Object.values(LOG_EVENT_TYPES), "delayed"]);

/** Whether the job hash must say what the message does not: its queue, or whether a `put` scheduled it. */
const needsLookup = (message: LogMessage) => message.event !== "completed" && message.event !== "advanced" && message.event !== "canceled";

export function qlessEventFeed(redis: Redis): JobEventFeed {
  /** The event of a message, given its job's stored queue and state where it needed them. */
  function toEvent(message: LogMessage, stored: [string | null, string | null] | undefined): StoreEvent | null {
    let type = LOG_EVENT_TYPES[message.event ?? ""];
    if (!type || !message.jid) return null;
    let queue = message.event === "advanced" ? message.to : message.queue;
    if (stored) {
      queue ??= stored[0] ?? undefined;
      if (message.event === "put" && stored[1] === "scheduled") type = "delayed";
    }
    if (!queue) return null;
    return { type, queue, jobId: message.jid, time: Date.now(), position: null };
  }

  /** The stored queue and state of each message that needs them, in one pipelined round trip. */
  async function lookUp(messages: LogMessage[]): Promise<Array<[string | null, string | null] | undefined>> {
    const pipeline = redis.pipeline();
    const looked = messages.map((message) => {
      const wanted = message.jid !== undefined && LOG_EVENT_TYPES[message.event ?? ""] !== undefined && needsLookup(message);
      if (wanted) pipeline.hmget(`ql:j:${message.jid}`, "queue", "state");
      return wanted;
    });
    const replies = pipeline.length > 0 ? ((await pipeline.exec()) ?? []) : [];
    let next = 0;
    return looked.map((wanted) => {
      if (!wanted) return undefined;
      const [error, fields] = replies[next++] ?? [new Error("qless-redis: no reply to a job lookup"), null];
      if (error) throw error;
      return fields as [string | null, string | null];
    });
  }

  return {
    eventFeed: { mechanism: "SUBSCRIBE ql:log (qless's own log channel)", history: false, everyMove: false, latencyMs: 1 },

    watchEvents(onEvent, options = {}) {
      const subscriber = redis.duplicate();
      /** The types asked for (null: every one); see tellOnly. */
      let tells: ReadonlySet<JobEventType> | null = null;
      const wanted = (type: JobEventType) => tells === null || tells.has(type);
      // Messages are told in the order they came. Those that arrive while the jobs of earlier ones
      // are looked up wait, and are looked up together: one round trip per burst, not per message.
      let waiting: string[] = [];
      let told = Promise.resolve();
      const tellWaiting = async () => {
        const texts = waiting;
        waiting = [];
        const messages: LogMessage[] = [];
        for (const text of texts) {
          try {
            const message = JSON.parse(text) as LogMessage;
            const type = LOG_EVENT_TYPES[message.event ?? ""];
            // A put is told as enqueued or delayed, which only its job's state says.
            if (type && (message.event === "put" ? wanted("enqueued") || wanted("delayed") : wanted(type))) messages.push(message);
          } catch (error) {
            options.onError?.(error as Error);
          }
        }
        try {
          const stored = await lookUp(messages);
          messages.forEach((message, i) => {
            const event = toEvent(message, stored[i]);
            if (event && wanted(event.type)) onEvent(event);
          });
        } catch (error) {
          options.onError?.(error as Error);
        }
      };
      subscriber.on("message", (_channel: string, text: string) => {
        // cjson writes `"event":"put"` so, and no other field can hold it unescaped: a put nobody
        // asked for is dropped before it is parsed (one message per job enqueued).
        if (tells !== null && !tells.has("enqueued") && !tells.has("delayed") && text.includes('"event":"put"')) return;
        if (waiting.length === 0) told = told.then(tellWaiting);
        waiting.push(text);
      });
      subscriber.on("error", (error: Error) => options.onError?.(error));
      let listening = true;
      let subscribed: Promise<unknown> = subscriber.subscribe("ql:log").catch((error: Error) => options.onError?.(error));
      return {
        close: async () => {
          await subscribed;
          subscriber.disconnect();
          await told;
        },
        // Asked for none of the moves ql:log tells, the feed stops listening to it (qless publishes
        // to no one then), and listens again once asked: what was published meanwhile is not told.
        tellOnly(types) {
          tells = types === null ? null : new Set([...types].filter((type) => TOLD.has(type)));
          const listen = tells === null || tells.size > 0;
          if (listen !== listening) {
            listening = listen;
            const change = () => (listen ? subscriber.subscribe("ql:log") : subscriber.unsubscribe("ql:log"));
            subscribed = subscribed.then(change).catch((error: Error) => options.onError?.(error));
          }
          return tells;
        },
      };
    },
  };
}
