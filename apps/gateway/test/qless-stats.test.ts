import type { Backend, Job } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { QlessHistory } from "../src/doors/qless-history.js";
import { QlessStats } from "../src/doors/qless-stats.js";

/**
 * qless's queue statistics kept by the doors for stores that are not qless (qless-stats.ts), and the
 * data text kept beside a put's history (qless-history.ts): the gateway's own memory, tested alone.
 * qless-door-translated.test.ts compares whole `stats` replies with qless's script.
 */
const backend = {} as Backend;
const DAY = 86_400;
const job = (id: string, fields: Partial<Job> = {}): Job =>
  ({ id, queue: "q", state: "waiting", attempts: 0, createdAt: 0, startedAt: null, data: {}, ...fields }) as Job;

describe("QlessStats", () => {
  it("counts each wait in queue.lua's histogram slot: seconds to 59, minutes, hours, then days up to 6", () => {
    const stats = new QlessStats();
    const waits = [0, 59.9, 60, 3599, 3600, DAY - 1, DAY, 6 * DAY, 7 * DAY];
    for (const [i, wait] of waits.entries()) {
      stats.put(backend, "q", `j${i}`, 0, null, undefined);
      stats.popped(backend, job(`j${i}`), wait);
    }
    const { histogram, count } = stats.of(backend, "q", 0).wait;
    // The day a wait is counted on is the day of its pop; each pop here falls on its own day or day 0.
    const onDay = (date: number) => stats.of(backend, "q", date).wait.histogram;
    const slots = (h: number[]) => h.flatMap((n, slot) => Array(n).fill(slot));
    expect(count).toBe(6);
    expect(slots(histogram)).toEqual([0, 59, 60, 118, 119, 141]);
    expect(slots(onDay(DAY))).toEqual([142]);
    expect(slots(onDay(6 * DAY))).toEqual([147]);
    // Seven days is past qless's last slot (d6): counted, in no slot.
    expect(stats.of(backend, "q", 7 * DAY).wait.count).toBe(1);
    expect(slots(onDay(7 * DAY))).toEqual([]);
  });

  it("measures a wait from the job's last put or pop, and a run from its pop, else from the store's timestamps", () => {
    const stats = new QlessStats();
    stats.put(backend, "q", "kept", 10, null, undefined);
    stats.popped(backend, job("kept"), 15);
    stats.popped(backend, job("kept"), 18); // popped again (a lost lock): waited 3 since the last pop
    stats.completed(backend, job("kept"), 20);
    // Put another way: measured from the store's createdAt and startedAt (ms).
    stats.popped(backend, job("unknown", { createdAt: 1_000 }), 5);
    stats.completed(backend, job("other", { createdAt: 1_000, startedAt: 4_000 }), 10);
    const { wait, run } = stats.of(backend, "q", 0);
    expect([wait.count, wait.mean]).toEqual([3, 4]);
    expect([run.count, run.mean]).toEqual([2, 4]);
    expect(run.std).toBeCloseTo(Math.SQRT2 * 2, 12);
  });

  it("counts failures and failed jobs on the failure's day; a put or cancel of a failed job takes it off that day", () => {
    const stats = new QlessStats();
    stats.failed(backend, "q", 100);
    stats.failed(backend, "q", 200);
    stats.put(backend, "q", "a", DAY + 5, job("a", { state: "failed" }), 100);
    stats.canceledFailed(backend, "q", 200);
    stats.lockLost(backend, "q", 300);
    expect(stats.of(backend, "q", 0)).toMatchObject({ failures: 2, failed: 0, retries: 1 });
    expect(stats.of(backend, "q", DAY)).toMatchObject({ failures: 0, failed: 0, retries: 0 });
  });
});

describe("QlessHistory's data text", () => {
  it("gives back the text a put sent while the job's data is that and the job stands where the doors left it", () => {
    const history = new QlessHistory();
    const text = '{"foo": "bar"}';
    history.put(backend, "q", "j", 0, 100, null, text);
    const canonical = JSON.stringify(JSON.parse(text));
    expect(history.dataTextOf(backend, job("j"), canonical)).toBe(text);
    // Data changed since (another door), or the job moved on: JSON.stringify's text.
    expect(history.dataTextOf(backend, job("j"), '{"foo":"baz"}')).toBeUndefined();
    expect(history.dataTextOf(backend, job("j", { state: "active", attempts: 1 }), canonical)).toBeUndefined();
    // Nothing kept when the text is JSON.stringify's own, not JSON, or long.
    history.put(backend, "q", "plain", 0, 100, null, canonical);
    history.put(backend, "q", "long", 0, 100, null, `{"x": "${"y".repeat(2000)}"}`);
    expect(history.dataTextOf(backend, job("plain"), canonical)).toBeUndefined();
    expect(history.dataTextOf(backend, job("long"), JSON.stringify({ x: "y".repeat(2000) }))).toBeUndefined();
  });
});
