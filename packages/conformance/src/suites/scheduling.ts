import { describe, expect, it } from "vitest";
import { type ConformanceOptions, eventually, expectNativeState, titled, useBackend } from "../context.js";

export function delaySuite(options: ConformanceOptions): void {
  const { title, skip } = titled(options, "delayed jobs", ["delays"]);
  describe.skipIf(skip)(title, () => {
    const ctx = useBackend(options);

    it("a delayed job is not handed out before its time, and is once it is due", async () => {
      const queue = ctx.queue();
      const enqueuedAt = Date.now();
      const { job } = await ctx.backend.enqueue(queue, { name: "later", delay: 800 });
      expect(job.state).toBe("delayed");
      expect(job.runAt).toBeGreaterThanOrEqual(enqueuedAt + 800);
      await expectNativeState(ctx, queue, job.id, "delayed");
      expect(await ctx.backend.reserve(queue, { worker: "w" })).toEqual([]);
      expect((await ctx.backend.counts(queue)).delayed).toBe(1);
      const due = await eventually(async () => (await ctx.backend.reserve(queue, { worker: "w" }))[0], "the delayed job to become due");
      expect(Date.now()).toBeGreaterThanOrEqual(enqueuedAt + 800);
      expect(due.id).toBe(job.id);
    });

    it("a job whose runAt has passed is waiting at once", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "past", runAt: Date.now() - 60_000 });
      expect(job.state).toBe("waiting");
      expect((await ctx.backend.reserve(queue, { worker: "w" }))[0]?.id).toBe(job.id);
    });
  });
}

export function prioritySuite(options: ConformanceOptions): void {
  const { title, skip } = titled(options, "priorities", ["priorities"]);
  describe.skipIf(skip)(title, () => {
    const ctx = useBackend(options);

    it("a higher priority is handed out first; equal priorities keep FIFO order", async () => {
      const queue = ctx.queue();
      const low = await ctx.backend.enqueue(queue, { name: "low", priority: 0 });
      const high1 = await ctx.backend.enqueue(queue, { name: "high-1", priority: 10 });
      const mid = await ctx.backend.enqueue(queue, { name: "mid", priority: 5 });
      const high2 = await ctx.backend.enqueue(queue, { name: "high-2", priority: 10 });
      const order: string[] = [];
      for (let i = 0; i < 4; i++) {
        const [job] = await ctx.backend.reserve(queue, { worker: "w" });
        if (job) order.push(job.id);
      }
      expect(order).toEqual([high1.job.id, high2.job.id, mid.job.id, low.job.id]);
    });

    it("get() reports the priority a job was enqueued with", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "p", priority: 7 });
      expect((await ctx.backend.get(queue, job.id))?.priority).toBe(7);
    });
  });
}

export function dependencySuite(options: ConformanceOptions): void {
  const { title, skip } = titled(options, "dependencies", ["dependencies"]);
  describe.skipIf(skip)(title, () => {
    const ctx = useBackend(options);

    it("a job that depends on another is blocked until that one completes", async () => {
      const queue = ctx.queue();
      const { job: parent } = await ctx.backend.enqueue(queue, { name: "first" });
      const { job: child } = await ctx.backend.enqueue(queue, { name: "then", dependsOn: [parent.id] });
      expect(child.state).toBe("blocked");
      await expectNativeState(ctx, queue, child.id, "blocked");
      const [reserved] = await ctx.backend.reserve(queue, { worker: "w", count: 2 });
      expect(reserved?.id).toBe(parent.id);
      expect(await ctx.backend.reserve(queue, { worker: "w" })).toEqual([]);
      await ctx.backend.complete(queue, parent.id, { worker: "w" });
      expect((await ctx.backend.get(queue, child.id))?.state).toBe("waiting");
      expect((await ctx.backend.reserve(queue, { worker: "w" }))[0]?.id).toBe(child.id);
    });
  });
}
