import type { GlideMqExtras, GlideMqSuspension } from "@switchyard/core";
import type { QueueKeys } from "./keys.js";
import { loadJobs } from "./listing.js";
import { type RedisClient, runScript } from "./scripts.js";

/*
 * glide-mq's suspended jobs (`job.suspend()` in a processor): state `suspended` with suspendReason,
 * suspendedAt and suspendTimeout in the hash, the id in `suspended` scored by its deadline, and the
 * signals that resume them (`signals:<id>` and the hash's `signals` field), as its Queue reads them.
 */

/** A signal's data was stored as JSON text (or '' for none): given back parsed where it parses. */
function parseSignals(raw: string | null | undefined): GlideMqSuspension["signals"] {
  if (!raw) return [];
  try {
    const list = JSON.parse(raw) as Array<{ name: string; data: unknown; receivedAt: number }>;
    return list.map((signal) => {
      if (typeof signal.data !== "string") return signal;
      try {
        return { ...signal, data: JSON.parse(signal.data) as unknown };
      } catch {
        return signal;
      }
    });
  } catch {
    // A malformed field reads as no signals, as glide-mq reads it.
    return [];
  }
}

type Suspensions = Pick<GlideMqExtras, "suspension" | "suspendedJobs" | "signal">;

export function suspensions(ready: () => Promise<RedisClient>, keysOf: (queue: string) => QueueKeys): Suspensions {
  return {
    async suspension(queue, id) {
      const [state, reason, suspendedAt, timeout, signals] = await (await ready()).hmget(
        keysOf(queue).job(id),
        "state",
        "suspendReason",
        "suspendedAt",
        "suspendTimeout",
        "signals",
      );
      if (state !== "suspended") return null;
      // In glide-mq's key order: reason, suspendedAt, timeout, signals.
      return {
        ...(reason ? { reason } : {}),
        suspendedAt: suspendedAt ? Number.parseInt(suspendedAt, 10) : 0,
        ...(timeout ? { timeout: Number.parseInt(timeout, 10) } : {}),
        signals: parseSignals(signals),
      };
    },

    async suspendedJobs(queue, start, end) {
      const redis = await ready();
      const keys = keysOf(queue);
      const ids = await redis.zrange(`${keys.base}suspended`, start, end >= 0 ? end : -1);
      return (await loadJobs(redis, queue, keys, ids)).flatMap((loaded) => (loaded ? [loaded.job] : []));
    },

    async signal(queue, id, name, data) {
      const keys = keysOf(queue);
      const reply = await runScript(
        await ready(),
        "signal",
        [keys.job(id), keys.stream, keys.events, `${keys.base}suspended`, `${keys.base}signals:${id}`],
        [id, name, data === undefined ? "" : JSON.stringify(data), Date.now()],
      );
      return reply === "ok";
    },
  };
}
