import { type GlideMqDeadLetter, InvalidStateError } from "@switchyard/core";
import { parseStored } from "./codec.js";
import { type QueueKeys, validateQueueName } from "./keys.js";
import type { GlideJobOptions } from "./options.js";
import { GlideProducer, type GlideProducerOptions } from "./producer.js";
import { type RedisClient, runScript } from "./scripts.js";

/*
 * glide-mq's dead-letter queues. A worker configured with `deadLetterQueue: {name}` records that name
 * in the queue's meta (`deadLetterQueueName`) and, when a job fails for good, adds a job of the same
 * name to that queue whose data is the envelope {originalQueue, originalJobId, data, failedReason,
 * attemptsMade}. A queue's dead letters are the jobs waiting in that queue's stream whose envelope
 * names the queue, as Queue.getDeadLetterJobs reads them.
 */

interface Envelope {
  originalQueue?: unknown;
  originalJobId?: unknown;
  data?: unknown;
  failedReason?: unknown;
  attemptsMade?: unknown;
}

/** The dead-letter queue's name, or null when the queue has none. */
async function deadLetterQueue(redis: RedisClient, keys: QueueKeys): Promise<string | null> {
  return (await redis.hget(keys.meta, "deadLetterQueueName")) || null;
}

/** A dead-letter job as glide-mq's proxy serializes it; null when it is not one of `queue`'s. */
function asDeadLetter(queue: string, id: string, hash: Record<string, string>): GlideMqDeadLetter | null {
  const data = parseStored(hash.data);
  const envelope = data !== null && typeof data === "object" && !Array.isArray(data) ? (data as Envelope) : undefined;
  if (envelope?.originalQueue !== queue) return null;
  const attempts = envelope.attemptsMade;
  const failedReason = typeof envelope.failedReason === "string" ? envelope.failedReason : hash.failedReason;
  return {
    attemptsMade:
      typeof attempts === "number" ? attempts : typeof attempts === "string" ? Number(attempts) : Number(hash.attemptsMade ?? 0),
    data: envelope.data ?? data,
    ...(failedReason !== undefined ? { failedReason } : {}),
    id,
    name: hash.name ?? "",
    ...(typeof envelope.originalJobId === "string" ? { originalJobId: envelope.originalJobId } : {}),
    originalQueue: queue,
    timestamp: Number(hash.timestamp ?? 0),
  };
}

async function hashes(redis: RedisClient, keys: QueueKeys, ids: string[]): Promise<Array<Record<string, string>>> {
  if (ids.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const id of ids) pipeline.hgetall(keys.job(id));
  const replies = (await pipeline.exec()) ?? [];
  const failed = replies.find(([error]) => error)?.[0];
  if (failed) throw failed;
  return replies.map(([, hash]) => (hash ?? {}) as Record<string, string>);
}

/** `producing`: the prefix and compression a replayed job is added with, as the backend adds jobs. */
export function deadLetters(ready: () => Promise<RedisClient>, keysOf: (queue: string) => QueueKeys, producing: GlideProducerOptions) {
  const one = async (queue: string, id: string): Promise<{ letter: GlideMqDeadLetter; keys: QueueKeys } | null> => {
    const redis = await ready();
    const dlq = await deadLetterQueue(redis, keysOf(queue));
    if (!dlq) return null;
    const keys = keysOf(dlq);
    const [hash = {}] = await hashes(redis, keys, [id]);
    const letter = Object.keys(hash).length === 0 ? null : asDeadLetter(queue, id, hash);
    return letter ? { letter, keys } : null;
  };

  const remove = async (keys: QueueKeys, id: string): Promise<boolean> => {
    const removed = await runScript(
      await ready(),
      "remove",
      [keys.events, keys.scheduled, keys.completed, keys.failed, keys.priority, keys.lifo, keys.leases, keys.blocked],
      [id],
    );
    return (removed as unknown[]).length > 0;
  };

  return {
    async deadLetters(queue: string, start: number, end: number): Promise<GlideMqDeadLetter[]> {
      const redis = await ready();
      const dlq = await deadLetterQueue(redis, keysOf(queue));
      if (!dlq) return [];
      const keys = keysOf(dlq);
      // The stream holds every queue's dead letters in arrival order: this queue's are picked out, then paged.
      const entries = (await redis.xrange(keys.stream, "-", "+")) as Array<[string, string[]]>;
      const ids = entries.map(([, fields]) => fields[fields.indexOf("jobId") + 1] ?? "").filter((id) => id !== "");
      const loaded = await hashes(redis, keys, ids);
      const letters = ids.flatMap((id, i) => {
        const hash = loaded[i] ?? {};
        const letter = Object.keys(hash).length === 0 ? null : asDeadLetter(queue, id, hash);
        return letter ? [letter] : [];
      });
      return letters.slice(start, end === -1 ? undefined : end + 1);
    },

    async deadLetter(queue: string, id: string): Promise<GlideMqDeadLetter | null> {
      return (await one(queue, id))?.letter ?? null;
    },

    async removeDeadLetter(queue: string, id: string): Promise<boolean> {
      const found = await one(queue, id);
      return found ? remove(found.keys, id) : false;
    },

    /**
     * As Queue.replayDeadLetterJob: the original job's data and options when it still exists (less
     * jobId, delay, deduplication and parent), else the envelope's data; added first, then the
     * dead letter removed, so a failure in between leaves a duplicate rather than a loss.
     */
    async replayDeadLetter(queue: string, id: string): Promise<{ id: string; name: string } | null> {
      const found = await one(queue, id);
      if (!found) return null;
      const { letter } = found;
      const target = letter.originalQueue ?? "";
      validateQueueName(target);
      const redis = await ready();
      let data = letter.data;
      let opts: GlideJobOptions | undefined;
      if (letter.originalJobId) {
        const [original = {}] = await hashes(redis, keysOf(target), [letter.originalJobId]);
        if (Object.keys(original).length > 0) {
          data = parseStored(original.data);
          const {
            jobId: _id,
            delay: _delay,
            deduplication: _dedup,
            parent: _parent,
            ...rest
          } = (parseStored(original.opts) ?? {}) as GlideJobOptions;
          opts = rest;
        }
      }
      const [outcome] = await new GlideProducer(redis, target, producing).addMany([
        { name: letter.name, data: data ?? null, ...(opts ? { opts } : {}) },
      ]);
      if (outcome?.status !== "created")
        throw new InvalidStateError("glidemq-valkey: DLQ replay was skipped due to duplicate or deduplicated job constraints", {
          queue,
          id,
        });
      await remove(found.keys, id);
      return { id: outcome.id, name: letter.name };
    },
  };
}

/**
 * A job that failed for good moves on to its queue's dead-letter queue, if it has one, as a glide-mq
 * worker configured with that dead-letter queue moves it: a new job of the same name carrying the
 * envelope. Answers the new job's id, or null when the queue has no dead-letter queue.
 */
export async function toDeadLetterQueue(
  redis: RedisClient,
  keysOf: (queue: string) => QueueKeys,
  queue: string,
  failed: Record<string, string>,
  producing: GlideProducerOptions,
): Promise<string | null> {
  const dlq = await deadLetterQueue(redis, keysOf(queue));
  if (!dlq) return null;
  const envelope = {
    originalQueue: queue,
    originalJobId: failed.id,
    data: parseStored(failed.data),
    failedReason: failed.failedReason ?? "",
    attemptsMade: Number(failed.attemptsMade ?? 0),
  };
  // The envelope is plain JSON, never compressed, as glide-mq writes it.
  const [outcome] = await new GlideProducer(redis, dlq, producing.prefix === undefined ? {} : { prefix: producing.prefix }).addMany([
    { name: failed.name ?? "", data: envelope },
  ]);
  return outcome?.status === "created" ? outcome.id : null;
}
