import type { Backend } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { type CompletedJob, QlessCompleted } from "../src/doors/qless-state.js";

/**
 * The qless doors' `ql:completed` (QlessCompleted) on its own: the order qless's sorted set keeps and
 * what each expiry takes, across many completions (past the point where the list drops the entries
 * it has skipped) and at its bound. qless-locks.test.ts checks the same rules through the door.
 */
const backend = {} as Backend;
const job = (jid: string, at: number, queue = "q"): CompletedJob => ({ queue, jid, at });
const jids = (jobs: CompletedJob[]) => jobs.map((entry) => entry.jid);

describe("QlessCompleted", () => {
  it("expires in the sorted set's order: by completion time, ties by jid", () => {
    const completed = new QlessCompleted();
    for (const entry of [job("b", 2), job("c", 1), job("a", 2), job("d", 3)]) completed.add(backend, entry);
    expect(jids(completed.expire(backend, 2, 10))).toEqual(["c", "a", "b"]);
    expect(jids(completed.expire(backend, 100, 10))).toEqual(["d"]);
    expect(completed.expire(backend, 100, 10)).toEqual([]);
  });

  it("a jid completed again moves to its new time, once", () => {
    const completed = new QlessCompleted();
    completed.add(backend, job("a", 1));
    completed.add(backend, job("b", 2));
    completed.add(backend, job("a", 3));
    expect(jids(completed.expire(backend, 0, 1))).toEqual(["b"]);
    expect(jids(completed.expire(backend, 3, 10))).toEqual(["a"]);
  });

  it("keeps the newest `keep` over 5,000 completions, each expiring the oldest, and one backend's list apart from another's", () => {
    const completed = new QlessCompleted();
    const other = {} as Backend;
    completed.add(other, job("elsewhere", 0));
    const expired: string[] = [];
    for (let i = 0; i < 5_000; i++) {
      completed.add(backend, job(`j${i}`, i));
      expired.push(...jids(completed.expire(backend, -1, 100)));
    }
    expect(expired).toEqual(Array.from({ length: 4_900 }, (_, i) => `j${i}`));
    // A jid taken long ago is new again; one still kept moves.
    completed.add(backend, job("j0", 6_000));
    completed.add(backend, job("j4950", 6_001));
    expect(jids(completed.expire(backend, 5_000, 10))).toEqual([
      ...Array.from({ length: 99 }, (_, i) => `j${4_900 + i}`).filter((jid) => jid !== "j4950"),
      "j4999",
    ]);
    expect(jids(completed.expire(backend, 10_000, 0))).toEqual(["j0", "j4950"]);
    expect(jids(completed.expire(other, 0, 0))).toEqual(["elsewhere"]);
  });

  it("holds at most 100,000 completions: past them the oldest go first", () => {
    const completed = new QlessCompleted();
    for (let i = 0; i <= 100_000; i++) completed.add(backend, job(`j${i}`, i));
    const kept = completed.expire(backend, Number.POSITIVE_INFINITY, 0);
    expect(kept).toHaveLength(100_000);
    expect(kept[0]?.jid).toBe("j1");
    expect(kept.at(-1)?.jid).toBe("j100000");
  });
});
