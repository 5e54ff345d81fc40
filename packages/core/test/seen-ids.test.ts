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
});
