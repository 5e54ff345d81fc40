import { AsyncLocalStorage } from "node:async_hooks";
import { describe, expect, it } from "vitest";
import { DIALECTS, useDialectTable } from "./dialects.js";

/**
 * The `clock` option is the time the rows record and the time reserve, heartbeat and the state
 * reads decide by (a qless client's `now` through the gateway): no statement takes the server's time.
 */
const T0 = 1_000_000_000_000;

for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): the clock option`, () => {
    const { open, row, queue } = useDialectTable(dialect, "wq_clock");
    const times = (record: Record<string, unknown>, ...columns: string[]) =>
      Object.fromEntries(columns.map((column) => [column, record[column] === null ? null : Number(record[column])]));

    it("rows carry the clock's times, and a delay and a lease run out by it", async () => {
      let now = T0;
      const wq = await open({ clock: () => now });
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "clocked", delay: 10_000 });
      expect(job).toMatchObject({ state: "delayed", createdAt: T0, runAt: T0 + 10_000 });
      expect(times(await row(job.id), "sy_created_ms", "sy_run_at")).toEqual({ sy_created_ms: T0, sy_run_at: T0 + 10_000 });

      now = T0 + 5_000;
      expect(await wq.reserve(q, { worker: "a" })).toEqual([]);
      expect((await wq.counts(q)).delayed).toBe(1);
      now = T0 + 10_000;
      expect((await wq.counts(q)).waiting).toBe(1);
      const [taken] = await wq.reserve(q, { worker: "a", leaseMs: 30_000 });
      expect(taken?.lease).toEqual({ worker: "a", expiresAt: T0 + 40_000 });
      expect(times(await row(job.id), "sy_started_ms", "sy_lease_until")).toEqual({
        sy_started_ms: T0 + 10_000,
        sy_lease_until: T0 + 40_000,
      });

      // The lease runs out by the clock, not by the real time (long past T0).
      now = T0 + 39_999;
      expect(await wq.reserve(q, { worker: "b" })).toEqual([]);
      now = T0 + 40_001;
      const [again] = await wq.reserve(q, { worker: "b", leaseMs: 30_000 });
      expect(again).toMatchObject({ id: job.id, attempts: 2, lease: { worker: "b", expiresAt: T0 + 70_001 } });

      now = T0 + 50_000;
      expect((await wq.heartbeat(q, job.id, { worker: "b", leaseMs: 30_000 })).lease?.expiresAt).toBe(T0 + 80_000);
      expect(times(await row(job.id), "sy_lease_until")).toEqual({ sy_lease_until: T0 + 80_000 });
      now = T0 + 60_000;
      expect((await wq.complete(q, job.id, { worker: "b" })).finishedAt).toBe(T0 + 60_000);
      expect(times(await row(job.id), "sy_finished_ms")).toEqual({ sy_finished_ms: T0 + 60_000 });
    });

    it("a retry's delay counts from the clock, and enqueues of one burst each keep their own time", async () => {
      let now = T0;
      // As the gateway gives each request its own time: the caller's, for all it awaits.
      const callers = new AsyncLocalStorage<number>();
      const wq = await open({ clock: () => callers.getStore() ?? now });
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "flaky", maxAttempts: 3 });
      await wq.reserve(q, { worker: "w" });
      now = T0 + 1_000;
      await wq.fail(q, job.id, { worker: "w", error: { message: "later" }, retryDelay: 5_000 });
      expect(times(await row(job.id), "sy_run_at")).toEqual({ sy_run_at: T0 + 6_000 });
      now = T0 + 5_999;
      expect(await wq.reserve(q, { worker: "w" })).toEqual([]);
      now = T0 + 6_000;
      expect(await wq.reserve(q, { worker: "w" })).toHaveLength(1);

      // Enqueues without an id may be written together (one burst); each row has its caller's time.
      const [a, b] = await Promise.all([
        callers.run(T0 + 7_000, () => wq.enqueue(q, { name: "burst" })),
        callers.run(T0 + 8_000, () => wq.enqueue(q, { name: "burst" })),
      ]);
      expect([a?.job.createdAt, b?.job.createdAt]).toEqual([T0 + 7_000, T0 + 8_000]);
      expect(times(await row(a?.job.id as string), "sy_created_ms")).toEqual({ sy_created_ms: T0 + 7_000 });
      expect(times(await row(b?.job.id as string), "sy_created_ms")).toEqual({ sy_created_ms: T0 + 8_000 });
    });
  });
}
