/**
 * The ids a reader has met, for an export that can hand a job out twice (see Page.mayRepeat), in
 * memory that stays small at millions of jobs: ids that are plain decimal numbers (what glide-mq,
 * Worker Queue and Cloudq's counters give) take one bit each in 8 KiB blocks of the number range they
 * fall in; any other id is kept as text. A Set of a million numeric strings takes about 70 MB; their
 * bits, when the numbers are dense, 125 KB.
 */
export class SeenIds {
  readonly #blocks = new Map<number, Uint8Array>();
  readonly #other = new Set<string>();

  /** Records the id; answers false when it was recorded before. */
  add(id: string): boolean {
    const number = numericId(id);
    if (number === null) {
      if (this.#other.has(id)) return false;
      this.#other.add(id);
      return true;
    }
    const blockIndex = Math.floor(number / BITS_PER_BLOCK);
    let block = this.#blocks.get(blockIndex);
    if (!block) {
      block = new Uint8Array(BITS_PER_BLOCK / 8);
      this.#blocks.set(blockIndex, block);
    }
    const bit = number % BITS_PER_BLOCK;
    const mask = 1 << (bit & 7);
    const byte = block[bit >> 3] as number;
    if (byte & mask) return false;
    block[bit >> 3] = byte | mask;
    return true;
  }
}

const BITS_PER_BLOCK = 65_536;

/** The id as a number when it is one written plainly (no sign, no leading zero), so each number has one id. */
function numericId(id: string): number | null {
  if (id.length > 15 || !/^(0|[1-9][0-9]*)$/.test(id)) return null;
  return Number(id);
}
