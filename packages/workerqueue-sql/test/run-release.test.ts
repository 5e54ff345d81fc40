import { LeaseLostError, hasRunRelease } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { DIALECTS, useDialectTable } from "./dialects.js";

/**
 * RunRelease: a held job given back without spending its run (what qless's `timeout` does). The row
 * is read directly: still `processing` with its lease over, `attempts` one lower; the next claim
 * takes it ahead of waiting rows and brings `attempts` back, so even a job on its last run is handed
 * out again rather than failed.
 */
for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): release a held job without spending its run`, () => {
    const { table, db, open, queue } = useDialectTable(dialect, "wq_release");
    const rowOf = async (q: string, id: string) =>
      (await db(table).where({ sy_queue: q, sy_job_id: id }).first()) as {
        status: string;
        attempts: number;
        sy_lease_until: number | string;
      };

    it("the lease ends and attempts drop by one; the next claim takes the job first and counts that run again", async () => {
      const wq = await open();
      if (!hasRunRelease(wq)) throw new Error("workerqueue-sql declares no RunRelease");
      const q = queue();
      await wq.enqueue(q, { name: "a", id: "a", maxAttempts: 3 });
      await wq.enqueue(q, { name: "b", id: "b" });
      const [held] = await wq.reserve(q, { worker: "w1", leaseMs: 60_000 });
      expect(held).toMatchObject({ id: "a", attempts: 1 });

      const released = await wq.release(q, "a", { worker: "w1" });
      expect(released.attempts).toBe(0);
      expect(released.lease?.expiresAt).toBeLessThanOrEqual(Date.now());
      const row = await rowOf(q, "a");
      expect(row.status).toBe("processing");
      expect(row.attempts).toBe(0);
      expect(Number(row.sy_lease_until)).toBeLessThanOrEqual(Date.now());

      const [again] = await wq.reserve(q, { worker: "w2", leaseMs: 60_000 });
      expect(again).toMatchObject({ id: "a", attempts: 1, lease: { worker: "w2" } });
      expect((await rowOf(q, "a")).attempts).toBe(1);
    });

    it("a job on its last run is handed out again, not failed as exhausted", async () => {
      const wq = await open();
      if (!hasRunRelease(wq)) throw new Error("workerqueue-sql declares no RunRelease");
      const q = queue();
      await wq.enqueue(q, { name: "last", id: "last", maxAttempts: 1 });
      await wq.reserve(q, { worker: "w1", leaseMs: 60_000 });
      await wq.release(q, "last", { worker: "w1" });
      const [again] = await wq.reserve(q, { worker: "w2", leaseMs: 60_000 });
      expect(again).toMatchObject({ id: "last", state: "active", attempts: 1 });
      expect((await rowOf(q, "last")).status).toBe("processing");
    });

    it("only the worker holding the job may release it; a refused release changes nothing", async () => {
      const wq = await open();
      if (!hasRunRelease(wq)) throw new Error("workerqueue-sql declares no RunRelease");
      const q = queue();
      await wq.enqueue(q, { name: "held", id: "held" });
      await wq.reserve(q, { worker: "w1", leaseMs: 60_000 });
      const before = await rowOf(q, "held");
      await expect(wq.release(q, "held", { worker: "someone-else" })).rejects.toBeInstanceOf(LeaseLostError);
      await wq.enqueue(q, { name: "waiting", id: "waiting" });
      await expect(wq.release(q, "waiting", { worker: "w1" })).rejects.toBeInstanceOf(LeaseLostError);
      expect(await rowOf(q, "held")).toEqual(before);
    });
  });
}
