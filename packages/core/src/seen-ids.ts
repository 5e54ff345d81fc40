/**
 * The ids a reader has met, for an export that can hand a job out twice (see Page.mayRepeat), in
 * memory that stays small at millions of jobs: an id that is a plain decimal number (what glide-mq,
 * Worker Queue and Cloudq's counters give), or a fixed text followed by one (`job-17`, `m17`), takes
 * one bit in 8 KiB blocks of the number range it falls in, per text; any other id is kept whole. A Set
 * of a million such ids takes about 70 MB; their bits, when the numbers are dense, 125 KB. Blocks stop
 * at MOST_BLOCKS (16 MB), so sparse numbers or many texts fall back to keeping ids whole, not to a block per id.
 */
export class SeenIds {
  /** Blocks of bits by the text before the number and the block's place in the number range. */
  readonly #blocks = new Map<string, Map<number, Uint8Array>>();
  #blockCount = 0;
  readonly #other = new Set<string>();

  /** Records the id; answers false when it was recorded before. */
  add(id: string): boolean {
    const numbered = numberedId(id);
    const block = numbered && this.#blockOf(numbered[0], Math.floor(numbered[1] / BITS_PER_BLOCK));
    if (!numbered || !block) {
      if (this.#other.has(id)) return false;
      this.#other.add(id);
      return true;
    }
    const bit = numbered[1] % BITS_PER_BLOCK;
    const mask = 1 << (bit & 7);
    const byte = block[bit >> 3] as number;
    if (byte & mask) return false;
    block[bit >> 3] = byte | mask;
    return true;
  }

  /**
   * The block of bits for numbers after `prefix` in the range `index`, made if there is room; null
   * when there is none (blocks are never dropped, so an id's place, block or whole, never changes).
   */
  #blockOf(prefix: string, index: number): Uint8Array | null {
    let blocks = this.#blocks.get(prefix);
    let block = blocks?.get(index);
    if (block) return block;
    if (this.#blockCount >= MOST_BLOCKS) return null;
    if (!blocks) {
      blocks = new Map();
      this.#blocks.set(prefix, blocks);
    }
    block = new Uint8Array(BITS_PER_BLOCK / 8);
    blocks.set(index, block);
    this.#blockCount++;
    return block;
  }
}

const BITS_PER_BLOCK = 65_536;
const MOST_BLOCKS = 2_048;

/**
 * The id as its text before the number it ends in, and that number, when the number is written
 * plainly (no leading zero, at most 15 digits): each id has one reading (the digits at its end, all
 * of them) and no two ids share one. Null otherwise (`m007`, `x`, a 16-digit number).
 */
function numberedId(id: string): [string, number] | null {
  let start = id.length;
  while (start > 0 && isDigit(id.charCodeAt(start - 1))) start--;
  const digits = id.length - start;
  if (digits === 0 || digits > 15 || (digits > 1 && id[start] === "0")) return null;
  return [id.slice(0, start), Number(id.slice(start))];
}

const isDigit = (code: number) => code >= 48 && code <= 57;
