import { describe, expect, it } from "vitest";
import { SeenIds } from "../src/index.js";

describe("SeenIds", () => {
  it("answers true the first time an id is added and false every time after, numeric or not", () => {
    const seen = new SeenIds();
    const ids = ["0", "1", "7", "65535", "65536", "123456789012345", "job-a", "1234567890123456", "", "x:1"];
    expect(ids.map((id) => seen.add(id))).toEqual(ids.map(() => true));
    expect(ids.map((id) => seen.add(id))).toEqual(ids.map(() => false));
  });

  it("keeps ids that write one number differently apart", () => {
    const seen = new SeenIds();
    expect(seen.add("7")).toBe(true);
    for (const other of ["07", "+7", "7.0", "7e0", " 7"]) expect(seen.add(other)).toBe(true);
    expect(seen.add("7")).toBe(false);
  });

  it("tells neighbouring and far-apart numbers apart across blocks", () => {
    const seen = new SeenIds();
    const numbers = Array.from({ length: 5_000 }, (_, i) => i * 37 + (i % 3) * 1_000_003);
    const unique = new Set(numbers);
    const added = numbers.filter((n) => seen.add(String(n))).length;
    expect(added).toBe(unique.size);
    expect(seen.add(String(numbers[0]! + 1))).toBe(!unique.has(numbers[0]! + 1));
  });

  it("takes an id of a fixed text and a number by its number, apart from the same number after another text or none", () => {
    const seen = new SeenIds();
    const ids = ["m7", "7", "job-7", "m70", "m007", "m0", "m00", "job-", "m7x", "m1234567890123456"];
    expect(ids.map((id) => seen.add(id))).toEqual(ids.map(() => true));
    expect(ids.map((id) => seen.add(id))).toEqual(ids.map(() => false));
    const many = Array.from({ length: 20_000 }, (_, i) => `m${i * 3}`);
    // m0 was added above.
    expect(many.filter((id) => seen.add(id)).length).toBe(many.length - 1);
    expect(seen.add("m1")).toBe(true);
    expect(seen.add("m3")).toBe(false);
  });

  it("past MOST_BLOCKS blocks (sparse numbers) ids are kept whole, and each is still known once, block or whole", () => {
    const seen = new SeenIds();
    // 2,500 numbers 2^16 apart: one block each until the 2,048th, then kept whole.
    const sparse = Array.from({ length: 2_500 }, (_, i) => `s${i * 65_536 + 5}`);
    expect(sparse.filter((id) => seen.add(id)).length).toBe(2_500);
    expect(sparse.filter((id) => seen.add(id)).length).toBe(0);
    expect(seen.add(`s${2_400 * 65_536 + 6}`)).toBe(true);
    expect(seen.add(`s${5 + 65_536}`)).toBe(false);
  });
});
