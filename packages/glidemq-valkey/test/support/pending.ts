import { CONSUMER_GROUP, type QueueKeys } from "../../src/keys.js";
import type { RedisClient } from "../../src/scripts.js";

/**
 * Waits until every entry pending in the queue's consumer group has been idle for at least `ms` on
 * the server's own clock, the one XAUTOCLAIM measures with (a fake test clock cannot move it).
 */
export async function untilPendingIdle(client: RedisClient, keys: QueueKeys, ms: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pending = (await client.xpending(keys.stream, CONSUMER_GROUP, "-", "+", 1000)) as Array<[string, string, number, number]>;
    if (pending.every(([, , idle]) => idle >= ms)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${pending.length} pending entries to be idle ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, Math.max(5, ms - Math.min(...pending.map(([, , idle]) => idle)))));
  }
}
