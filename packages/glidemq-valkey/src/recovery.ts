import { CONSUMER_GROUP, type QueueKeys } from "./keys.js";
import { type RedisClient, runScript } from "./scripts.js";

/**
 * Recovery of jobs a glide-mq worker (or any consumer without a Switchyard lease) claimed and then
 * abandoned, run by the Backend's reserve so that a queue served only by Switchyard still gets them
 * back. glide-mq's own rules: XAUTOCLAIM of entries idle for `stalledInterval`, a job is stalled once
 * `lastActive` is older than its lock duration, `maxStalledCount` stalls and it fails. Jobs under a
 * Switchyard lease are left to the lease's own expiry.
 */
export interface StalledRecoveryOptions {
  /** At most one recovery pass per queue and Backend per this many ms; default 5000. */
  interval?: number;
  /** glide-mq's defaults: stalledInterval 30000, lockDuration 30000, maxStalledCount 1. */
  stalledInterval?: number;
  lockDuration?: number;
  maxStalledCount?: number;
}

/** The consumer name the recovery claims idle entries under (XAUTOCLAIM needs one). */
const RECOVERY_CONSUMER = "switchyard:recovery";

export function stalledRecovery(
  options: StalledRecoveryOptions | false | undefined,
): (client: RedisClient, keys: QueueKeys) => Promise<void> {
  if (options === false) return async () => undefined;
  const interval = options?.interval ?? 5000;
  const stalledInterval = options?.stalledInterval ?? 30_000;
  const lockDuration = options?.lockDuration ?? 30_000;
  const maxStalled = options?.maxStalledCount ?? 1;
  const lastRun = new Map<string, number>();
  return async (client, keys) => {
    const now = Date.now();
    if (now - (lastRun.get(keys.base) ?? 0) < interval) return;
    lastRun.set(keys.base, now);
    await runScript(
      client,
      "reclaim-stalled",
      [keys.stream, keys.events, keys.failed, keys.metricsFailed],
      [CONSUMER_GROUP, RECOVERY_CONSUMER, stalledInterval, maxStalled, now, lockDuration, "1"],
    );
    await runScript(
      client,
      "reclaim-stalled-list",
      [keys.stream, keys.events, keys.failed, keys.metricsFailed, keys.listActive],
      [stalledInterval, maxStalled, now, lockDuration, "1"],
    );
  };
}
