import { ScopedStorage } from "./scoped-storage.js";

/**
 * The clock the gateway gives every backend it opens (backends.ts): the gateway's own (`Date.now()`),
 * except while a qless command runs for a client that passed its `now`. qless's script takes each
 * command's time from its caller (`<command> <now> <args...>`) and records and compares that time
 * (put and pop times, a lock's expiry, delays, whether a lock has run out); the qless doors run a
 * translated command inside `callerClock.run(now * 1000, ...)`, so the store does the same.
 */
const callerTime = new ScopedStorage<number>();

export const callerClock = {
  /** Runs `work` (and everything it awaits) with `nowMs` as the current time. */
  run<T>(nowMs: number, work: () => Promise<T>): Promise<T> {
    return callerTime.run(nowMs, work);
  },
  /** The caller's time while a command runs inside `run`, else the gateway's; epoch ms. */
  now(): number {
    return callerTime.getStore() ?? Date.now();
  },
};

/** Where the qless doors take a command's time: the client's `now` (as qless does) or the store's own clock. */
export type QlessClock = "caller" | "store";

/** The latest time a JavaScript Date holds, in ms: a `now` outside 0..this is no time a store keeps. */
const MAX_DATE_MS = 8.64e15;

/**
 * Runs a translated qless command on the caller's clock when the doors honour it and the client
 * passed a `now` (float epoch seconds; to the ms, as the stores keep times), else on the store's.
 */
export function onQlessClock<T>(clock: QlessClock, now: number | string | undefined, work: () => Promise<T>): Promise<T> {
  const seconds = typeof now === "string" && now.trim() !== "" ? Number(now) : now;
  const ms = typeof seconds === "number" ? Math.round(seconds * 1000) : Number.NaN;
  if (clock !== "caller" || !Number.isFinite(ms) || ms < 0 || ms > MAX_DATE_MS) return work();
  return callerClock.run(ms, work);
}
