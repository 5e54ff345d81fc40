import { type JobEventFeed, type JobEventType, type StoreEvent, pause, watchInRounds } from "@switchyard/core";
import type { Redis } from "ioredis";
import { flatToRecord } from "./codec.js";
import { queueKeys } from "./keys.js";
import type { QueueDirectory } from "./queue-directory.js";
import { type RedisClient, isCluster } from "./scripts.js";

/**
 * glide-mq's events stream (`<prefix>:{q}:events`, trimmed to about 1,000 entries) as a job event
 * feed. glide-mq writes no `active` event for jobs read from its stream (spec 2.7), so the feed does
 * not tell every move. Entry ids are `<ms>-<seq>`, so a position is an entry id and a time is one too.
 */

/** How glide-mq names the moves that are job events here; the others (drained, cleaned...) are not. */
const GLIDE_EVENT_TYPES: Record<string, JobEventType> = {
  added: "enqueued",
  promoted: "enqueued",
  active: "active",
  progress: "progress",
  completed: "completed",
  failed: "failed",
  retrying: "retrying",
  stalled: "retrying",
  "delay-changed": "delayed",
  removed: "canceled",
  revoked: "canceled",
  paused: "paused",
  resumed: "resumed",
};

/** Every move the feed can tell. */
const TOLD: ReadonlySet<JobEventType> = new Set(Object.values(GLIDE_EVENT_TYPES));

/**
 * How often new queues are looked for in the backend's QueueDirectory (whose walks of the keyspace
 * are rarer still on a large one); a queue someone waits on, watches or enqueues to through this
 * gateway is read at once (`include`). A queue found late is read from the watch's start, so
 * nothing is missed.
 */
const DISCOVERY_MS = 30_000;
/** How long one blocking read waits (standalone), which is also how soon an included queue is read. */
const BLOCK_MS = 250;
const CLUSTER_POLL_MS = 100;
/**
 * The least time from one read that found events to the next (standalone). Every enqueue writes an
 * event, so under load each read returns at once, and a read names every queue's stream: with 300
 * queues the feed had taken a fifth of the gateway's CPU (and as much of Redis's) for its reads
 * alone. A read every ROUND_GAP_MS at most takes what came meanwhile at once (READ_COUNT per queue,
 * within the about 1,000 entries glide-mq keeps in a stream).
 */
const ROUND_GAP_MS = 20;
const READ_COUNT = 500;

type StreamReply = Array<[key: string, entries: Array<[id: string, fields: string[]]>]> | null;

const timeOf = (entryId: string) => Number(entryId.slice(0, entryId.indexOf("-")));

function toEvent(queue: string, entryId: string, fields: string[]): StoreEvent | null {
  const entry = flatToRecord(fields);
  const type = GLIDE_EVENT_TYPES[entry.event ?? ""];
  if (!type) return null;
  const queueEvent = type === "paused" || type === "resumed";
  return {
    type,
    queue,
    ...(queueEvent || entry.jobId === undefined ? {} : { jobId: entry.jobId }),
    time: timeOf(entryId),
    position: entryId,
  };
}

export function glideEventFeed(ready: () => Promise<RedisClient>, prefix: string, directory: QueueDirectory): JobEventFeed {
  const eventsKey = (queue: string) => queueKeys(queue, prefix).events;
  const positionAt = (time: number) => `${Math.max(0, Math.floor(time) - 1)}-18446744073709551615`;

  return {
    eventFeed: {
      mechanism:
        "XREAD BLOCK on each queue's glide-mq events stream, at most every 20 ms (polled every 100 ms on a cluster); new queues found every 30 s or when included",
      history: true,
      everyMove: false,
      latencyMs: ROUND_GAP_MS,
    },

    positionAt,

    async eventsAfter(position, limit) {
      const redis = await ready();
      const queues = await directory.names();
      const read = await Promise.all(
        queues.map(async (queue) => {
          const entries = (await redis.xrange(eventsKey(queue), `(${position}`, "+", "COUNT", limit)) as Array<[string, string[]]>;
          return entries.map(([id, fields]) => toEvent(queue, id, fields));
        }),
      );
      const byId = (a: StoreEvent, b: StoreEvent) => {
        const [am, as] = (a.position as string).split("-").map(Number) as [number, number];
        const [bm, bs] = (b.position as string).split("-").map(Number) as [number, number];
        return am - bm || as - bs;
      };
      return read
        .flat()
        .filter((event): event is StoreEvent => event !== null)
        .sort(byId)
        .slice(0, limit);
    },

    watchEvents(onEvent, options = {}) {
      const start = options.after ?? positionAt(Date.now());
      /** Each queue read, with the last entry read of its stream. */
      const after = new Map<string, string>();
      /** The queue of each events stream read; made as queues are added, not at every read. */
      const queueOfKey = new Map<string, string>();
      let discoveredAt = 0;
      let reader: Redis | undefined;
      /** The moves asked for (null: every one); see tellOnly. */
      let tells: ReadonlySet<JobEventType> | null = null;

      const follow = (queue: string, from: string) => {
        if (after.has(queue)) return;
        after.set(queue, from);
        queueOfKey.set(eventsKey(queue), queue);
      };
      const discover = async () => {
        const now = Date.now();
        if (now - discoveredAt < DISCOVERY_MS) return;
        discoveredAt = now;
        // A queue first named now was made after the walk before (which may be minutes old on a large
        // keyspace), so it is read from the watch's start: none of its events since then is missed.
        for (const queue of await directory.names()) follow(queue, start);
      };
      const deliver = (reply: StreamReply) => {
        for (const [key, entries] of reply ?? []) {
          const queue = queueOfKey.get(key) as string;
          for (const [id, fields] of entries) {
            after.set(queue, id);
            // glide-mq and this adapter write the event's name first: a move nobody asked for (every
            // enqueue writes one) is dropped before its fields are read.
            const named = fields[0] === "event" ? GLIDE_EVENT_TYPES[fields[1] ?? ""] : undefined;
            if (tells !== null && named !== undefined && !tells.has(named)) continue;
            const event = toEvent(queue, id, fields);
            if (event && (tells === null || tells.has(event.type))) onEvent(event);
          }
        }
      };

      const watch = watchInRounds(
        async (signal) => {
          const redis = await ready();
          await discover();
          if (after.size === 0) return await pause(CLUSTER_POLL_MS, signal);
          if (isCluster(redis)) {
            // Keys of different queues live in different slots: one non-blocking read per queue.
            const replies = await Promise.all(
              [...queueOfKey].map(
                ([key, queue]) => redis.xread("COUNT", READ_COUNT, "STREAMS", key, after.get(queue) as string) as Promise<StreamReply>,
              ),
            );
            for (const reply of replies) deliver(reply);
            await pause(CLUSTER_POLL_MS, signal);
            return;
          }
          // A blocking read holds its connection, so it has one of its own.
          if (!reader) {
            reader = (redis as Redis).duplicate();
            reader.on("error", (error: Error) => options.onError?.(error));
          }
          if (signal.aborted) return;
          const reply = (await reader.xread(
            "COUNT",
            READ_COUNT,
            "BLOCK",
            BLOCK_MS,
            "STREAMS",
            // Both maps hold the queues in the order follow() added them.
            ...queueOfKey.keys(),
            ...after.values(),
          )) as StreamReply;
          deliver(reply);
          if (reply !== null) await pause(ROUND_GAP_MS, signal);
        },
        { pauseMs: 0, ...(options.onError ? { onError: options.onError } : {}) },
      );
      return {
        include(queue) {
          follow(queue, positionAt(Date.now() - BLOCK_MS));
        },
        // The streams are read whole either way (a stream has no filter by field); what is not asked
        // for is neither parsed nor told, nor awaited by the gateway as the echo of its own moves.
        tellOnly(types) {
          // A delayed add is an `added` entry too, told as enqueued: asked for delayed, it tells those.
          const asked = types === null ? null : [...types, ...(types.has("delayed") ? (["enqueued"] as const) : [])];
          tells = asked === null ? null : new Set(asked.filter((type) => TOLD.has(type)));
          return tells;
        },
        close: async () => {
          // A blocked read ends with its connection; the round then sees the watch closed.
          const closing = watch.close();
          reader?.disconnect();
          await closing;
        },
      };
    },
  };
}
