import { completeAndReserve } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { type ConformanceOptions, eventually, expectNativeState, reserveOne, titled, useBackend } from "../context.js";

export function completeFailSuite(options: ConformanceOptions): void {
  const { title } = titled(options, "complete and fail");
  describe(title, () => {
    const ctx = useBackend(options);

    it("complete() finishes an active job: completed, finishedAt set, never handed out again", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "done" });
      await reserveOne(ctx, queue, "w");
      const before = Date.now();
      const done = await ctx.backend.complete(queue, job.id, { worker: "w", result: { ok: true } });
      expect(done).toMatchObject({ id: job.id, state: "completed", lease: null });
      expect(done.finishedAt).toBeGreaterThanOrEqual(before - 1000);
      if (ctx.capabilities.results) expect(done.result).toEqual({ ok: true });
      await expectNativeState(ctx, queue, job.id, "completed");
      expect(await ctx.backend.reserve(queue, { worker: "w" })).toEqual([]);
      if (ctx.capabilities.keepsCompleted) expect((await ctx.backend.counts(queue)).completed).toBe(1);
    });

    it("completeAndReserve() completes the job and leases the worker's next one in the same call; nothing due, no next", async () => {
      const queue = ctx.queue();
      const first = (await ctx.backend.enqueue(queue, { name: "first" })).job;
      const second = (await ctx.backend.enqueue(queue, { name: "second" })).job;
      await reserveOne(ctx, queue, "w");
      const { completed, next } = await completeAndReserve(ctx.backend, queue, first.id, { worker: "w", result: 7 }, { worker: "w2" });
      expect(completed).toMatchObject({ id: first.id, state: "completed", lease: null });
      if (ctx.capabilities.results) expect(completed.result).toBe(7);
      await expectNativeState(ctx, queue, first.id, "completed");
      expect(next.map((job) => [job.id, job.state, job.attempts])).toEqual([[second.id, "active", 1]]);
      if (ctx.capabilities.leases) {
        // The next job is w2's: another worker cannot complete it, w2 can, and then nothing is left.
        expect(next[0]?.lease?.worker).toBe("w2");
        await expect(ctx.backend.complete(queue, second.id, { worker: "w" })).rejects.toMatchObject({ code: "LEASE_LOST" });
      }
      const last = await completeAndReserve(ctx.backend, queue, second.id, { worker: "w2" }, { worker: "w2", count: 5 });
      expect(last.completed).toMatchObject({ id: second.id, state: "completed" });
      expect(last.next).toEqual([]);
      await expect(completeAndReserve(ctx.backend, queue, "404404404", { worker: "w2" }, { worker: "w2" })).rejects.toMatchObject({
        code: "NOT_FOUND",
      });
    });

    it("complete() of a job that is not active is an InvalidStateError; of an unknown job a NotFoundError", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "waiting" });
      await expect(ctx.backend.complete(queue, job.id, { worker: "w" })).rejects.toMatchObject({ code: "INVALID_STATE" });
      expect(await ctx.backend.get(queue, job.id)).toMatchObject({ state: "waiting" });
      await expect(ctx.backend.complete(queue, "404404404", { worker: "w" })).rejects.toMatchObject({ code: "NOT_FOUND" });
    });

    it("fail() with attempts left puts the job back with the error recorded, and the next run counts a second attempt", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "retry-me", maxAttempts: 3 });
      await reserveOne(ctx, queue, "w");
      const failed = await ctx.backend.fail(queue, job.id, { worker: "w", error: { message: "boom" } });
      expect(["waiting", "delayed"]).toContain(failed.state);
      expect(failed.error?.message).toBe("boom");
      expect(failed.attempts).toBe(1);
      const again = await eventually(async () => (await ctx.backend.reserve(queue, { worker: "w" }))[0], "the retried job");
      expect(again).toMatchObject({ id: job.id, attempts: 2 });
    });

    it("fail() on the last attempt fails the job for good, keeping the error", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "doomed", maxAttempts: 1 });
      await reserveOne(ctx, queue, "w");
      const failed = await ctx.backend.fail(queue, job.id, { worker: "w", error: { message: "fatal", group: "BadInput" } });
      expect(failed).toMatchObject({ state: "failed", error: { message: "fatal" }, lease: null });
      expect(failed.finishedAt).not.toBeNull();
      await expectNativeState(ctx, queue, job.id, "failed");
      expect((await ctx.backend.counts(queue)).failed).toBe(1);
      expect(await ctx.backend.reserve(queue, { worker: "w" })).toEqual([]);
    });

    it("fail({retry: false}) fails the job for good even with attempts left", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "no-retry", maxAttempts: 5 });
      await reserveOne(ctx, queue, "w");
      const failed = await ctx.backend.fail(queue, job.id, { worker: "w", error: { message: "stop" }, retry: false });
      expect(failed.state).toBe("failed");
    });
  });

  const backoff = titled(options, "retry backoff", ["delays"]);
  describe.skipIf(backoff.skip)(backoff.title, () => {
    const ctx = useBackend(options);
    it("a failed job with a fixed backoff waits it out before it is handed out again", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "backoff", maxAttempts: 3, backoff: { type: "fixed", delay: 800 } });
      await reserveOne(ctx, queue, "w");
      const failedAt = Date.now();
      const failed = await ctx.backend.fail(queue, job.id, { worker: "w", error: { message: "later" } });
      expect(failed.state).toBe("delayed");
      expect(failed.runAt).toBeGreaterThanOrEqual(failedAt + 700);
      expect(await ctx.backend.reserve(queue, { worker: "w" })).toEqual([]);
      const again = await eventually(async () => (await ctx.backend.reserve(queue, { worker: "w" }))[0], "the job after its backoff");
      expect(Date.now()).toBeGreaterThanOrEqual(failedAt + 700);
      expect(again).toMatchObject({ id: job.id, attempts: 2 });
    });
  });
}
