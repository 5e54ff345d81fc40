import { setNewest } from "@switchyard/core";

/**
 * The hashes of the jobs this Backend reserved, as its reserve (or a heartbeat since) left them, so
 * that a completion need not read the whole hash back nor carry it in the reply: the script checks
 * that the job is still in the run the copy is of (its `processedOn`), and the Backend answers the
 * completed job from the copy with what completion wrote. glide-mq's own Worker likewise answers a
 * completed job from the copy it fetched. A change another client makes to a running job's fields
 * (glide-mq's `updateData`) is not seen in that answer; the stored job has it.
 *
 * Bounded: at most MOST_HASHES copies, the oldest dropped first, and none of a hash longer than
 * MOST_HASH_CHARS (its completion reads the hash as before). A job that ends another way (failed,
 * taken back after its lease) leaves its copy until it is dropped: the run check keeps it from being
 * used for a later run.
 */
export class HeldHashes {
  readonly #hashes = new Map<string, Record<string, string>>();

  /** Keeps the hash of a job just reserved, or refreshes the copy of one held (a heartbeat's answer). */
  keep(queue: string, id: string, hash: Record<string, string>): void {
    const key = keyOf(queue, id);
    if (charsOf(hash) > MOST_HASH_CHARS) this.#hashes.delete(key);
    else setNewest(this.#hashes, key, hash, MOST_HASHES);
  }

  /** Refreshes the copy only when one is kept (a heartbeat of a job this Backend did not reserve keeps none). */
  refresh(queue: string, id: string, hash: Record<string, string>): void {
    if (this.#hashes.has(keyOf(queue, id))) this.keep(queue, id, hash);
  }

  /** The copy of the job's hash, taken out: a completion uses it once. */
  take(queue: string, id: string): Record<string, string> | undefined {
    const key = keyOf(queue, id);
    const hash = this.#hashes.get(key);
    this.#hashes.delete(key);
    return hash;
  }

  drop(queue: string, id: string): void {
    this.#hashes.delete(keyOf(queue, id));
  }
}

/** About the running jobs of a busy process; each copy is a job's fields (at most MOST_HASH_CHARS). */
const MOST_HASHES = 10_000;
/** Jobs with more text than this (data, options, progress) are read back at completion instead. */
const MOST_HASH_CHARS = 4_096;

const keyOf = (queue: string, id: string) => `${queue}\u0000${id}`;

function charsOf(hash: Record<string, string>): number {
  let chars = 0;
  for (const field in hash) chars += field.length + (hash[field] as string).length;
  return chars;
}
