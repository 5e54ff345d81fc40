import type { Backend, Job } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { QlessHistory } from "../src/doors/qless-history.js";

/**
 * The history the qless doors keep for jobs on stores that are not qless (qless-history.ts): trimmed
 * as job.lua trims `ql:j:<jid>-history`, shown only while the job stands where the doors left it, and
 * kept for a bounded number of jobs. The state is the gateway's own memory, so it is tested alone.
 */
const backend = {} as Backend;
const job = (id: string, state: Job["state"], attempts: number): Job => ({ id, queue: "q", state, attempts }) as Job;
const whens = (history: QlessHistory, id: string, state: Job["state"] = "waiting", attempts = 0) =>
  history.of(backend, job(id, state, attempts))?.map((entry) => entry.when);

describe("QlessHistory", () => {
  it("keeps the first entry and the newest ones up to max-job-history, as job.lua's LPOP, LTRIM -most+2 and LPUSH do", () => {
    const history = new QlessHistory();
    for (let second = 0; second < 100; second++)
      history.put(backend, "q", "five", second * 1000, 5, second === 0 ? null : job("five", "waiting", 0));
    // qless-core's TestJob.test_history: max-job-history 5 after 100 puts.
    expect(whens(history, "five")).toEqual([0, 96, 97, 98, 99]);
    for (let second = 0; second < 6; second++)
      history.put(backend, "q", "two", second * 1000, 2, second === 0 ? null : job("two", "waiting", 0));
    // LTRIM from 0 cuts nothing: with 2, job.lua keeps every entry.
    expect(whens(history, "two")).toEqual([0, 1, 2, 3, 4, 5]);
    for (let second = 0; second < 4; second++)
      history.put(backend, "q", "none", second * 1000, 0, second === 0 ? null : job("none", "waiting", 0));
    expect(whens(history, "none")).toEqual([0, 1, 2, 3]);
  });

  it("shows the history only while the job stands where the doors' last change left it", () => {
    const history = new QlessHistory();
    history.put(backend, "q", "j", 0, 100, null);
    history.add(backend, job("j", "active", 1), 1000, 100, { what: "popped", worker: "w" });
    expect(whens(history, "j", "active", 1)).toEqual([0, 1]);
    // Run again elsewhere (another door's reserve), or finished elsewhere: rebuilt from timestamps instead.
    expect(whens(history, "j", "active", 2)).toBeUndefined();
    expect(whens(history, "j", "completed", 1)).toBeUndefined();
    // A put of a jid whose history is not kept (put another way first) starts none.
    history.put(backend, "q", "elsewhere", 0, 100, job("elsewhere", "waiting", 0));
    expect(whens(history, "elsewhere")).toBeUndefined();
  });

  it("keeps the history of at most 10,000 jobs, those changed last: past them the oldest tenth is dropped", () => {
    const history = new QlessHistory();
    for (let i = 0; i <= 10_000; i++) history.put(backend, "q", `j${i}`, 0, 100, null);
    expect(whens(history, "j0")).toBeUndefined();
    expect(whens(history, "j1000")).toBeUndefined();
    expect(whens(history, "j1001")).toEqual([0]);
    expect(whens(history, "j10000")).toEqual([0]);
  });
});
