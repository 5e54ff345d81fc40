import { describe, expect, it } from "vitest";
import { ToldMoves } from "../src/index.js";

/** ToldMoves: what a feed told of each record, kept while a look's overlap may read the record again. */
describe("ToldMoves", () => {
  const OVERLAP = 2_000;

  it("knows a move told, and a new move of the record as new", () => {
    const told = new ToldMoves(0, OVERLAP);
    expect(told.told("1", "enqueued:100:0")).toBe(false);
    told.tell("1", "enqueued:100:0");
    expect(told.told("1", "enqueued:100:0")).toBe(true);
    expect(told.told("1", "active:150:1")).toBe(false);
    told.tell("1", "active:150:1");
    expect(told.told("1", "active:150:1")).toBe(true);
    expect(told.told("1", "enqueued:100:0")).toBe(false);
  });

  it("keeps a record while the newest change told has not moved twice the overlap past it, however long that takes", () => {
    const told = new ToldMoves(10_000, OVERLAP);
    told.tell("a", "completed:10000:1");
    // A quiet store: looks read the same overlap again and again, the newest change stays where it was.
    for (let look = 0; look < 100; look++) told.forgetBefore(10_000);
    expect(told.told("a", "completed:10000:1")).toBe(true);
    // Within twice the overlap after it (and through one change of generation), it may still be read again.
    told.forgetBefore(13_999);
    expect(told.told("a", "completed:10000:1")).toBe(true);
    told.forgetBefore(14_000);
    told.tell("b", "completed:14000:1");
    expect(told.told("a", "completed:10000:1")).toBe(true);
    told.forgetBefore(17_999);
    expect(told.told("a", "completed:10000:1")).toBe(true);
    // Past it, no look reads it again: forgotten, while what came later stays.
    told.forgetBefore(18_000);
    expect(told.told("a", "completed:10000:1")).toBe(false);
    expect(told.told("b", "completed:14000:1")).toBe(true);
  });

  it("a record told again in the newer generation outlives the older one", () => {
    const told = new ToldMoves(0, OVERLAP);
    told.tell("r", "active:0:1");
    told.forgetBefore(4_000);
    told.tell("r", "completed:4000:1");
    told.forgetBefore(8_000);
    expect(told.told("r", "completed:4000:1")).toBe(true);
  });
});
