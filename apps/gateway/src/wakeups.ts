import type { JobEventType, JobEvents } from "./events.js";

/** The events after which a queue may hold a job a parked reserver could take. */
const MAKES_JOBS_CLAIMABLE: ReadonlySet<JobEventType> = new Set(["enqueued", "retrying", "resumed"]);

/**
 * Reservers parked on a queue, and what wakes them: an event that a job may be claimable there,
 * told by this gateway's own calls or by the store's feed (so a job another gateway or a native
 * producer enqueued wakes them as soon as the feed tells it). What no event tells (a lease running
 * out, a legacy producer on a store whose feed misses it) is found by looking again every `pollMs`,
 * and a Worker Queue datagram wakes every queue, as it wakes a legacy master.
 */
export class Wakeups {
  readonly #parked = new Map<string, Set<() => void>>();
  #events: JobEvents | undefined;
  #unsubscribe: (() => void) | undefined;

  constructor(readonly pollMs: number) {}

  /** Resolves on the next wake of `queue`, after `ms`, or when `signal` aborts, whichever is first. */
  sleep(queue: string, ms: number, signal?: AbortSignal): Promise<void> {
    this.#events?.watchQueue(queue);
    this.#listen();
    return new Promise((resolve) => {
      const parked = this.#parked.get(queue) ?? new Set();
      this.#parked.set(queue, parked);
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        parked.delete(done);
        if (parked.size === 0 && this.#parked.get(queue) === parked) this.#parked.delete(queue);
        if (this.#parked.size === 0) this.#stopListening();
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      parked.add(done);
    });
  }

  /**
   * Wakes the reservers of a queue whenever `events` says a job may have become claimable there. It
   * listens only while a reserver is parked (the events keep reading a while after), so while none
   * is, the stores' feeds need not read the jobs enqueued.
   */
  follow(events: JobEvents): void {
    this.#events = events;
  }

  #listen(): void {
    if (this.#unsubscribe || !this.#events) return;
    this.#unsubscribe = this.#events.subscribe(
      (event) => {
        if (MAKES_JOBS_CLAIMABLE.has(event.type)) this.wake(event.queue);
      },
      [...MAKES_JOBS_CLAIMABLE],
    );
  }

  #stopListening(): void {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
  }

  wake(queue: string): void {
    for (const done of [...(this.#parked.get(queue) ?? [])]) done();
  }

  wakeAll(): void {
    for (const queue of [...this.#parked.keys()]) this.wake(queue);
  }

  /** How many reservers wait on `queue` right now (on every queue without one). */
  parked(queue?: string): number {
    if (queue !== undefined) return this.#parked.get(queue)?.size ?? 0;
    let total = 0;
    for (const parked of this.#parked.values()) total += parked.size;
    return total;
  }

  /**
   * Reserves until it gets something (`reserve` answers undefined for nothing), `waitMs` is over or
   * the client goes away (`signal`). The signal is looked at before each reserve: a job reserved for
   * a client that has gone would sit out its lease.
   */
  async reserveWaiting<T>(
    queue: string,
    reserve: () => Promise<T | undefined>,
    waitMs: number,
    signal: AbortSignal,
  ): Promise<T | undefined> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      if (signal.aborted) return undefined;
      const job = await reserve();
      const left = deadline - Date.now();
      if (job || left <= 0) return job;
      await this.sleep(queue, Math.min(this.pollMs, left), signal);
    }
  }
}
