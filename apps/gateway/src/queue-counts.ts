import type { JobCounts } from "@switchyard/core";
import type { NamedBackend } from "./backends.js";

/** A queue whose last count found at least this many jobs is a large one (see QueueCounts). */
export const LARGE_QUEUE_JOBS = 10_000;
/**
 * A large queue's counts serve until they are older than this many times what reading them took, so
 * counting takes at most about a twentieth of the store's time per queue, however many readers ask.
 */
export const COST_SHARE = 20;

interface Reading {
  counts: JobCounts;
  endedAt: number;
  tookMs: number;
}

const total = (counts: JobCounts) => Object.values(counts).reduce((sum, n) => sum + n, 0);

/**
 * The job counts that the dashboard and /metrics show, read at a bounded cost. A SQL or MongoDB store
 * counts a queue by reading its rows: a million-job queue costs PostgreSQL about a second of CPU a
 * count, and an open dashboard asks again 300 ms after every event that touched the queue, so one
 * browser tab kept a store's two cores busy (`npm run bench -- large-queue`). The readers of a queue
 * share the count in flight (a store slow to count is not asked again while it counts, its first
 * count too). Queues under LARGE_QUEUE_JOBS are otherwise counted at every call, as before: they are
 * cheap, and someone watching a job move there sees it at once. A large queue's counts serve until
 * older than COST_SHARE times what the count took: a million-job count that took 0.4 s serves for
 * 8 s, about the dashboard's own 15 s poll, where a job more or less is not what its reader looks for. API callers (`/v1/.../counts`, the doors) read the
 * backend directly and always get the count of the moment.
 */
export class QueueCounts {
  /** The last reading of each large queue, by backend and queue. */
  readonly #large = new Map<string, Reading>();
  readonly #inFlight = new Map<string, Promise<JobCounts>>();

  constructor(private readonly clock: () => number = Date.now) {}

  read(named: NamedBackend, queue: string): Promise<JobCounts> {
    const key = `${named.name}\0${queue}`;
    const running = this.#inFlight.get(key);
    if (running) return running;
    const last = this.#large.get(key);
    if (last && this.clock() - last.endedAt < COST_SHARE * last.tookMs) return Promise.resolve(last.counts);
    const started = this.clock();
    const reading = named.backend
      .counts(queue)
      .then((counts) => {
        const endedAt = this.clock();
        if (total(counts) >= LARGE_QUEUE_JOBS) this.#large.set(key, { counts, endedAt, tookMs: endedAt - started });
        else this.#large.delete(key);
        return counts;
      })
      .finally(() => this.#inFlight.delete(key));
    this.#inFlight.set(key, reading);
    return reading;
  }
}
