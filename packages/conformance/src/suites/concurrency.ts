import type { Backend, Job } from "@switchyard/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConformanceOptions, titled } from "../context.js";

const RESERVERS = 8;
const JOBS = 500;

export function concurrencySuite(options: ConformanceOptions): void {
  const { title } = titled(options, "concurrent reserve");
  describe(title, () => {
    let backends: Backend[] = [];
    beforeAll(async () => {
      backends = await Promise.all(Array.from({ length: RESERVERS }, () => options.createBackend()));
    });
    afterAll(async () => {
      await Promise.all(backends.map((b) => b.close()));
    });

    it(`${RESERVERS} concurrent reservers on ${JOBS} jobs: every job is handed out exactly once`, async () => {
      const queue = `cf-race-${Math.random().toString(36).slice(2, 10)}`;
      const [producer] = backends;
      if (!producer) throw new Error("no backend");
      const ids = new Set<string>();
      for (let start = 0; start < JOBS; start += 100) {
        const batch = Array.from({ length: Math.min(100, JOBS - start) }, (_, i) => ({ name: "race", data: { n: start + i } }));
        for (const r of await producer.enqueueBulk(queue, batch)) ids.add(r.job.id);
      }
      const handedOut: Job[] = [];
      await Promise.all(
        backends.map(async (backend, index) => {
          for (;;) {
            const jobs = await backend.reserve(queue, { worker: `reserver-${index}`, count: 3, leaseMs: 120_000 });
            if (jobs.length === 0) return;
            handedOut.push(...jobs);
          }
        }),
      );
      const counts = new Map<string, number>();
      for (const job of handedOut) counts.set(job.id, (counts.get(job.id) ?? 0) + 1);
      expect([...counts.values()].filter((n) => n > 1)).toEqual([]);
      expect(new Set(counts.keys())).toEqual(ids);
      expect(handedOut).toHaveLength(JOBS);
      // A rule about correctness, not speed: slow servers (FerretDB) get the time they need.
    }, 120_000);

    it(`${RESERVERS} concurrent reserve(count: 1) calls on at least ${RESERVERS} waiting jobs: each gets a job`, async () => {
      // A claimer must not hold back jobs it does not take (e.g. lock every candidate row), or the
      // others come back empty while jobs wait.
      const queue = `cf-each-${Math.random().toString(36).slice(2, 10)}`;
      const [producer] = backends;
      if (!producer) throw new Error("no backend");
      await producer.enqueueBulk(
        queue,
        Array.from({ length: RESERVERS * 2 }, (_, i) => ({ name: "each", data: { n: i } })),
      );
      const answers = await Promise.all(
        backends.map((backend, index) => backend.reserve(queue, { worker: `each-${index}`, count: 1, leaseMs: 120_000 })),
      );
      expect(answers.map((jobs) => jobs.length)).toEqual(Array(RESERVERS).fill(1));
      expect(new Set(answers.flat().map((job) => job.id)).size).toBe(RESERVERS);
    }, 120_000);
  });
}
