import { describe, expect, it } from "vitest";
import { dropOldest } from "../src/index.js";

const filled = (count: number) => new Map(Array.from({ length: count }, (_, i) => [`k${i}`, i]));

describe("dropOldest", () => {
  it("leaves a map of at most `most` entries as it is", () => {
    const map = filled(100);
    dropOldest(map, 100);
    expect([...map.keys()]).toEqual([...filled(100).keys()]);
  });

  it("past `most`, drops the oldest entries down to nine tenths of it, and keeps the newest in order", () => {
    const map = filled(101);
    dropOldest(map, 100);
    expect(map.size).toBe(90);
    expect([...map.values()]).toEqual(Array.from({ length: 90 }, (_, i) => 11 + i));
  });

  it("counts an entry set again as new: it outlives those set once before it", () => {
    const map = filled(100);
    map.delete("k0");
    map.set("k0", 0);
    map.set("k100", 100);
    dropOldest(map, 100);
    expect(map.has("k0")).toBe(true);
    // Oldest first: k1 to k11 go, k12 stays.
    expect(map.has("k11")).toBe(false);
    expect(map.has("k12")).toBe(true);
    expect(map.size).toBe(90);
  });

  it("keeps a map within `most` however many entries come one at a time, each of the newest kept", () => {
    const map = new Map<number, number>();
    for (let i = 0; i < 25_000; i++) {
      map.set(i, i);
      dropOldest(map, 1_000);
      expect(map.size).toBeLessThanOrEqual(1_000);
    }
    expect(map.size).toBeGreaterThanOrEqual(900);
    const kept = [...map.keys()];
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, i) => 25_000 - kept.length + i));
  });

  it("with `most` under ten drops down to `most` itself", () => {
    const map = filled(9);
    dropOldest(map, 5);
    expect([...map.keys()]).toEqual(["k4", "k5", "k6", "k7", "k8"]);
  });
});
