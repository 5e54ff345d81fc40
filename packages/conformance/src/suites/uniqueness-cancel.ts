import { describe, expect, it } from "vitest";
import { type ConformanceOptions, reserveOne, titled, useBackend } from "../context.js";

export function uniquenessSuite(options: ConformanceOptions): void {
  const { title, skip } = titled(options, "unique keys", ["uniqueKeys"]);
  describe.skipIf(skip)(title, () => {
    const ctx = useBackend(options);

    it("a second enqueue with the same unique key returns the first job and creates nothing", async () => {
      const queue = ctx.queue();
      const first = await ctx.backend.enqueue(queue, { name: "charge", data: { try: 1 }, uniqueKey: "order-7" });
      const second = await ctx.backend.enqueue(queue, { name: "charge", data: { try: 2 }, uniqueKey: "order-7" });
      expect(first.created).toBe(true);
      expect(second).toMatchObject({ created: false, job: { id: first.job.id, data: { try: 1 } } });
      expect(await ctx.probe.countJobs(queue)).toBe(1);
    });

    it("different unique keys make different jobs", async () => {
      const queue = ctx.queue();
      const a = await ctx.backend.enqueue(queue, { name: "charge", uniqueKey: "order-1" });
      const b = await ctx.backend.enqueue(queue, { name: "charge", uniqueKey: "order-2" });
      expect(a.job.id).not.toBe(b.job.id);
      expect(await ctx.probe.countJobs(queue)).toBe(2);
    });

    // The rule every adapter keeps: a unique key is held while its job is unfinished (waiting,
    // delayed, active, blocked, or failed with a retry to come) and let go when the job finishes.
    it("a unique key is held while its job is retried: an enqueue between two attempts returns the job", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "charge", uniqueKey: "order-9", maxAttempts: 3 });
      await reserveOne(ctx, queue, "w");
      await ctx.backend.fail(queue, job.id, { worker: "w", error: { message: "try again" } });
      const again = await ctx.backend.enqueue(queue, { name: "charge", uniqueKey: "order-9" });
      expect(again).toMatchObject({ created: false, job: { id: job.id } });
    });

    for (const finish of ["complete", "fail for good", "cancel"] as const) {
      it(`a unique key is let go when its job finishes (${finish}): the next enqueue with it creates a new job`, async () => {
        const queue = ctx.queue();
        const { job } = await ctx.backend.enqueue(queue, { name: "charge", uniqueKey: "order-3" });
        if (finish === "cancel") await ctx.backend.cancel(queue, job.id);
        else {
          await reserveOne(ctx, queue, "w");
          if (finish === "complete") await ctx.backend.complete(queue, job.id, { worker: "w" });
          else await ctx.backend.fail(queue, job.id, { worker: "w", error: { message: "no" }, retry: false });
        }
        const next = await ctx.backend.enqueue(queue, { name: "charge", uniqueKey: "order-3" });
        expect(next.created).toBe(true);
        expect(next.job.id).not.toBe(job.id);
        expect(next.job.state).toBe("waiting");
      });
    }

    it("concurrent enqueues with one unique key agree on a single job", async () => {
      const queue = ctx.queue();
      const results = await Promise.all(Array.from({ length: 8 }, () => ctx.backend.enqueue(queue, { name: "race", uniqueKey: "same" })));
      expect(new Set(results.map((r) => r.job.id)).size).toBe(1);
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(await ctx.probe.countJobs(queue)).toBe(1);
    });
  });
}

export function cancelSuite(options: ConformanceOptions): void {
  const { title } = titled(options, "cancel");
  describe(title, () => {
    const ctx = useBackend(options);

    it("cancel() withdraws a waiting job: it is never handed out and counts no longer show it waiting", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "never" });
      await ctx.backend.cancel(queue, job.id);
      const after = await ctx.backend.get(queue, job.id);
      expect(after === null || after.state === "canceled").toBe(true);
      expect(await ctx.backend.reserve(queue, { worker: "w" })).toEqual([]);
      expect((await ctx.backend.counts(queue)).waiting).toBe(0);
    });

    it("cancel() of an active job takes it from its worker, whose complete() is then refused", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "stop-me" });
      await reserveOne(ctx, queue, "w");
      await ctx.backend.cancel(queue, job.id);
      await expect(ctx.backend.complete(queue, job.id, { worker: "w" })).rejects.toMatchObject({
        code: expect.stringMatching(/^(NOT_FOUND|LEASE_LOST|INVALID_STATE)$/),
      });
    });

    for (const finish of ["completed", "failed"] as const) {
      it(`cancel() of a ${finish} job is an InvalidStateError (NotFoundError where it is gone) and changes nothing`, async () => {
        const queue = ctx.queue();
        const { job } = await ctx.backend.enqueue(queue, { name: "done" });
        await reserveOne(ctx, queue, "w");
        if (finish === "completed") await ctx.backend.complete(queue, job.id, { worker: "w" });
        else await ctx.backend.fail(queue, job.id, { worker: "w", error: { message: "no" }, retry: false });
        const before = await ctx.backend.get(queue, job.id);
        // A backend that keeps no completed jobs has nothing left to cancel.
        const refusal = before === null ? "NOT_FOUND" : "INVALID_STATE";
        await expect(ctx.backend.cancel(queue, job.id)).rejects.toMatchObject({ code: refusal });
        expect(await ctx.backend.get(queue, job.id)).toEqual(before);
      });
    }

    it("cancel() of an unknown job is a NotFoundError", async () => {
      await expect(ctx.backend.cancel(ctx.queue(), "404404404")).rejects.toMatchObject({ code: "NOT_FOUND" });
    });
  });
}
