/**
 * What a walk of the whole keyspace (SCAN) found, shared by every reader in one backend until it is
 * stale. glide-mq keeps no index of its queues nor of its flow parents, so finding them is such a
 * walk, whose cost grows with the job hashes: at a million of them 1.3 s of Redis's CPU and 1.9 s of
 * wall time (measured here). A walk's finding serves until it is older than the larger of FRESH_MS
 * and COST_SHARE times the walk's own duration: on a small keyspace it is at most seconds old, and on
 * any keyspace walks take at most 1/COST_SHARE of the time. Readers that ask during a walk share it.
 */

/** How long a walk's finding serves without regard to its cost. */
export const FRESH_MS = 5_000;
/** A finding serves for at least this many times as long as its walk took (a walk at most 1/50 of the time). */
export const COST_SHARE = 50;

export interface Walked<T> {
  found: T;
  /** When the walk began, on the walk's clock: what was written before, it saw. */
  startedAt: number;
}

export class KeyspaceWalk<T> {
  #last: (Walked<T> & { servesUntil: number }) | null = null;
  #walking: Promise<Walked<T>> | null = null;

  constructor(
    private readonly walk: () => Promise<T>,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The finding of a walk still serving, else of a new one (the same object while it serves). */
  async read(): Promise<Walked<T>> {
    if (this.#last && this.clock() < this.#last.servesUntil) return this.#last;
    this.#walking ??= (async () => {
      const startedAt = this.clock();
      try {
        const found = await this.walk();
        const took = this.clock() - startedAt;
        this.#last = { found, startedAt, servesUntil: startedAt + took + Math.max(FRESH_MS, COST_SHARE * took) };
        return this.#last;
      } finally {
        this.#walking = null;
      }
    })();
    return this.#walking;
  }
}
