import type { JobEvent, JobEvents } from "../events.js";

/** How far back the counts go: one bucket a minute. */
export const THROUGHPUT_MINUTES = 60;
const MINUTE_MS = 60_000;

interface Bucket {
  /** Start of the minute, epoch milliseconds. */
  at: number;
  completed: number;
  failed: number;
}

/**
 * Jobs completed and failed (for good) per minute and queue, counted from the gateway's events so a
 * chart survives a page reload. It counts what this gateway process saw, like /metrics; each queue
 * keeps at most THROUGHPUT_MINUTES buckets, so memory grows with the number of queues only.
 */
export class Throughput {
  readonly #queues = new Map<string, Bucket[]>();
  readonly #stop: () => void;

  constructor(events: JobEvents) {
    this.#stop = events.subscribe((event) => this.record(event), ["completed", "failed"]);
  }

  record(event: Pick<JobEvent, "type" | "queue" | "time">): void {
    if (event.type !== "completed" && event.type !== "failed") return;
    const at = event.time - (event.time % MINUTE_MS);
    let buckets = this.#queues.get(event.queue);
    if (!buckets) {
      buckets = [];
      this.#queues.set(event.queue, buckets);
    }
    // Events arrive in time order, so only the newest bucket can be this minute's.
    let bucket = buckets.at(-1);
    if (!bucket || bucket.at < at) {
      bucket = { at, completed: 0, failed: 0 };
      buckets.push(bucket);
      while (buckets.length > 0 && buckets[0]!.at <= at - THROUGHPUT_MINUTES * MINUTE_MS) buckets.shift();
    } else if (bucket.at > at) {
      bucket = buckets.find((candidate) => candidate.at === at);
      if (!bucket) return;
    }
    bucket[event.type]++;
  }

  /** The last THROUGHPUT_MINUTES minutes up to `now`, oldest first, with zeros where nothing finished. */
  minutes(queue: string, now = Date.now()): Bucket[] {
    const current = now - (now % MINUTE_MS);
    const held = new Map((this.#queues.get(queue) ?? []).map((bucket) => [bucket.at, bucket]));
    return Array.from({ length: THROUGHPUT_MINUTES }, (_, i) => {
      const at = current - (THROUGHPUT_MINUTES - 1 - i) * MINUTE_MS;
      const bucket = held.get(at);
      return { at, completed: bucket?.completed ?? 0, failed: bucket?.failed ?? 0 };
    });
  }

  close(): void {
    this.#stop();
  }
}
