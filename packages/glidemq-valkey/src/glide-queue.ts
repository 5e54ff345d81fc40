import {
  BackendUnavailableError,
  type GlideMqCounts,
  type GlideMqEvent,
  type GlideMqExtras,
  type GlideMqMetrics,
  type GlideMqQueues,
  type GlideMqWorker,
  InvalidStateError,
  type Job,
  NotFoundError,
  ValidationError,
} from "@switchyard/core";
import { glideExtras } from "./glide-extras.js";
import { CONSUMER_GROUP, type QueueKeys } from "./keys.js";
import { keysStartingWith, loadJobs, pageJobs } from "./listing.js";
import { jobCounts } from "./queue-admin.js";
import { upsertScheduler } from "./schedulers.js";
import { type RedisClient, runScript } from "./scripts.js";

/*
 * glide-mq's own view and administration of a queue (what its Queue class answers), for the
 * glide-mq door: counts and lists as glide-mq computes them, and its changePriority, changeDelay,
 * promote, drain, retryJobs and clean, each one script with glide-mq's keys, states and events.
 */

/** A script's refusal (`error:<why>` or `no_op`) as the core error a door answers with. */
function refused(reply: string, queue: string, id: string): void {
  if (reply === "ok" || reply === "no_op") return;
  if (reply === "error:not_found") throw new NotFoundError(`glidemq-valkey: no job ${id} in queue ${queue}`, { queue, id });
  const why = reply.replace(/^error:/, "").replaceAll("_", " ");
  throw new InvalidStateError(`glidemq-valkey: job ${id} cannot be changed: ${why}`, { queue, id });
}

/** The ids in the queue's stream, in order: glide-mq's "waiting" list (entries a worker holds included). */
async function streamIds(redis: RedisClient, keys: QueueKeys, end: number): Promise<string[]> {
  const entries = (await (end >= 0 ? redis.xrange(keys.stream, "-", "+", "COUNT", end + 1) : redis.xrange(keys.stream, "-", "+"))) as Array<
    [string, string[]]
  >;
  return entries.map(([, fields]) => fields[fields.indexOf("jobId") + 1] ?? "").filter((id) => id !== "");
}

/** A worker registration `{addr, pid, startedAt, activeJobs}`, or null for a malformed one (skipped, as glide-mq does). */
function parseRegistration(value: string | null): Omit<GlideMqWorker, "id" | "age"> | null {
  try {
    const entry = JSON.parse(value ?? "null") as Record<string, unknown> | null;
    if (typeof entry?.addr !== "string" || typeof entry.pid !== "number" || typeof entry.startedAt !== "number") return null;
    return {
      addr: entry.addr,
      pid: entry.pid,
      startedAt: entry.startedAt,
      activeJobs: typeof entry.activeJobs === "number" ? entry.activeJobs : 0,
    };
  } catch {
    return null;
  }
}

function checkDelay(ms: number, what: string): void {
  if (!Number.isFinite(ms) || ms < 0) throw new ValidationError(`glidemq-valkey: ${what} must be a non-negative number of ms`);
}

/** The dead-letter routes are dead-letters.ts's. */
type OwnQueues = Omit<GlideMqQueues, "deadLetters" | "deadLetter" | "removeDeadLetter" | "replayDeadLetter">;

/** The key prefix (`glide`), read off any queue's keys `<prefix>:{<queue>}:`. */
const prefixOf = (keysOf: (queue: string) => QueueKeys) => keysOf("q").base.slice(0, -"{q}:".length - 1);

export function glideQueue(
  ready: () => Promise<RedisClient>,
  keysOf: (queue: string) => QueueKeys,
  clock: () => number = Date.now,
): OwnQueues & GlideMqExtras {
  const jobsByIds = async (redis: RedisClient, queue: string, keys: QueueKeys, ids: string[]): Promise<Job[]> =>
    (await loadJobs(redis, queue, keys, ids)).flatMap((loaded) => (loaded ? [loaded.job] : []));

  return {
    // Job output streams, suspensions, usage and broadcast: glide-extras.ts.
    ...glideExtras(ready, keysOf, prefixOf(keysOf)),

    async glideCounts(queue): Promise<GlideMqCounts> {
      return jobCounts(await ready(), keysOf(queue));
    },

    async glideJobs(queue, state, start, end) {
      const redis = await ready();
      const keys = keysOf(queue);
      const upTo = end >= 0 ? end + 1 : undefined;
      if (state === "waiting") return jobsByIds(redis, queue, keys, (await streamIds(redis, keys, end)).slice(start, upTo));
      if (state === "active") {
        // Claimed from the stream or the lists, by glide-mq workers or through Switchyard: core's list.
        const jobs: Job[] = [];
        let cursor: string | undefined;
        do {
          const page = await pageJobs(redis, queue, keys, "active", 1000, cursor);
          jobs.push(...page.items);
          cursor = page.cursor ?? undefined;
        } while (cursor && (upTo === undefined || jobs.length < upTo));
        return jobs.slice(start, upTo);
      }
      const set = state === "delayed" ? keys.scheduled : state === "completed" ? keys.completed : keys.failed;
      return jobsByIds(redis, queue, keys, await redis.zrange(set, start, end));
    },

    async changePriority(queue, id, priority) {
      if (!Number.isInteger(priority) || priority < 0 || priority > 2048)
        throw new ValidationError("glidemq-valkey: priority is a whole number from 0 to 2048");
      const keys = keysOf(queue);
      const reply = await runScript(
        await ready(),
        "change-priority",
        [keys.job(id), keys.stream, keys.scheduled, keys.events],
        [id, priority, CONSUMER_GROUP],
      );
      refused(String(reply), queue, id);
    },

    async changeDelay(queue, id, delay) {
      checkDelay(delay, "a delay");
      const keys = keysOf(queue);
      const reply = await runScript(
        await ready(),
        "change-delay",
        [keys.job(id), keys.stream, keys.scheduled, keys.events],
        [id, Math.round(delay), clock(), CONSUMER_GROUP],
      );
      refused(String(reply), queue, id);
    },

    async promote(queue, id) {
      const keys = keysOf(queue);
      const reply = String(await runScript(await ready(), "promote-job", [keys.job(id), keys.stream, keys.scheduled, keys.events], [id]));
      refused(reply === "error:not_delayed" ? "error:not_delayed" : reply, queue, id);
    },

    async drain(queue, delayed) {
      const keys = keysOf(queue);
      const reply = await runScript(
        await ready(),
        "drain",
        [keys.stream, keys.scheduled, keys.events, keys.id, keys.lifo, keys.priority],
        [delayed ? "1" : "0", CONSUMER_GROUP],
      );
      return Number(reply);
    },

    async retryFailed(queue, count) {
      const keys = keysOf(queue);
      const reply = await runScript(
        await ready(),
        "retry-failed",
        [keys.failed, keys.scheduled, keys.events, keys.id],
        [Math.max(0, Math.floor(count)), clock()],
      );
      return Number(reply);
    },

    async clean(queue, state, graceMs, limit) {
      checkDelay(graceMs, "an age");
      const keys = keysOf(queue);
      const set = state === "completed" ? keys.completed : keys.failed;
      const reply = await runScript(await ready(), "clean", [set, keys.events, keys.id], [clock() - graceMs, limit]);
      return (reply as unknown[]).map(String);
    },

    async readEvents(queue, after, count): Promise<GlideMqEvent[]> {
      const redis = await ready();
      const reply = (await redis.xrange(keysOf(queue).events, `(${after}`, "+", "COUNT", count)) as Array<[string, string[]]>;
      return reply.map(([id, flat]) => {
        const fields: Record<string, string> = {};
        for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i] ?? ""] = flat[i + 1] ?? "";
        const { event = "", ...rest } = fields;
        return { id, event, fields: rest };
      });
    },

    async rateLimit(queue) {
      const [max, duration] = await (await ready()).hmget(keysOf(queue).meta, "rateLimitMax", "rateLimitDuration");
      return max == null || duration == null ? null : { max: Number(max), duration: Number(duration) };
    },

    async setRateLimit(queue, limit) {
      const redis = await ready();
      const { meta } = keysOf(queue);
      if (limit === null) await redis.hdel(meta, "rateLimitMax", "rateLimitDuration");
      else await redis.hset(meta, "rateLimitMax", String(limit.max), "rateLimitDuration", String(limit.duration));
    },

    async metrics(queue, type, start, end): Promise<GlideMqMetrics> {
      const redis = await ready();
      const keys = keysOf(queue);
      const [count, fields] = await Promise.all([
        redis.zcard(type === "completed" ? keys.completed : keys.failed),
        redis.hgetall(type === "completed" ? keys.metricsCompleted : keys.metricsFailed),
      ]);
      // Fields m:<minute>:c (jobs) and m:<minute>:d (their summed run time, ms).
      const minutes = new Map<number, { count: number; duration: number }>();
      for (const [field, value] of Object.entries(fields)) {
        const match = /^m:(\d+):([cd])$/.exec(field);
        if (!match) continue;
        const minute = minutes.get(Number(match[1])) ?? { count: 0, duration: 0 };
        minutes.set(Number(match[1]), minute);
        if (match[2] === "c") minute.count = Number.parseInt(value, 10) || 0;
        else minute.duration = Number.parseInt(value, 10) || 0;
      }
      const data = [...minutes]
        .sort(([a], [b]) => a - b)
        .map(([timestamp, m]) => ({ timestamp, count: m.count, avgDuration: m.count > 0 ? Math.round(m.duration / m.count) : 0 }));
      return { count, data: end === -1 ? data.slice(start) : data.slice(start, end + 1), meta: { resolution: "minute" } };
    },

    async workers(queue): Promise<GlideMqWorker[]> {
      const redis = await ready();
      const registry = keysOf(queue).worker("");
      const keys = await keysStartingWith(redis, registry);
      const values = keys.length === 0 ? [] : await redis.mget(...keys);
      const now = Date.now();
      const workers: GlideMqWorker[] = [];
      values.forEach((value, i) => {
        const entry = parseRegistration(value);
        if (entry) workers.push({ id: keys[i]!.slice(registry.length), ...entry, age: Math.max(0, now - entry.startedAt) });
      });
      return workers.sort((a, b) => a.startedAt - b.startedAt);
    },

    async schedulers(queue) {
      const stored = await (await ready()).hgetall(keysOf(queue).schedulers);
      return Object.entries(stored).flatMap(([name, json]) => {
        // A malformed entry is skipped, as glide-mq's getRepeatableJobs skips it.
        try {
          return [{ name, entry: JSON.parse(json) as Record<string, unknown> }];
        } catch {
          return [];
        }
      });
    },

    async removeScheduler(queue, name) {
      const redis = await ready();
      const { schedulers } = keysOf(queue);
      // glide-mq's own lock while its scheduler ticks or upserts: wait for it as glide-mq does (25 ms steps, 5 s).
      for (let attempt = 0; attempt < 200; attempt++) {
        const reply = await runScript(redis, "remove-scheduler", [schedulers, `${schedulers}:lock:__tick__`], [name]);
        if (reply !== "busy") return Number(reply) === 1;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      throw new BackendUnavailableError("glidemq-valkey: glide-mq's scheduler lock stayed held for 5 s; try again");
    },

    async upsertScheduler(queue, name, schedule, template) {
      await upsertScheduler(await ready(), keysOf(queue), name, schedule, template);
    },

    async lastEventId(queue) {
      const redis = await ready();
      const [last] = (await redis.xrevrange(keysOf(queue).events, "+", "-", "COUNT", 1)) as Array<[string, string[]]>;
      return last?.[0] ?? "0-0";
    },
  };
}
