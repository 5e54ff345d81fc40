import { describe, expect, it } from "vitest";
import { type ConformanceOptions, expectNativeState, titled, useBackend } from "../context.js";

export function reserveSuite(options: ConformanceOptions): void {
  const { title } = titled(options, "reserve");
  describe(title, () => {
    const ctx = useBackend(options);

    it("reserve() claims the oldest waiting job, marks it active and counts the attempt", async () => {
      const queue = ctx.queue();
      const { job: first } = await ctx.backend.enqueue(queue, { name: "a" });
      await ctx.backend.enqueue(queue, { name: "b" });
      const before = Date.now();
      const [job] = await ctx.backend.reserve(queue, { worker: "worker-1", leaseMs: 30_000 });
      expect(job).toMatchObject({ id: first.id, name: "a", state: "active", attempts: 1 });
      expect(job?.startedAt).toBeGreaterThanOrEqual(before - 1000);
      if (ctx.capabilities.leases) {
        expect(job?.lease?.worker).toBe("worker-1");
        expect(job?.lease?.expiresAt).toBeGreaterThanOrEqual(before + 29_000);
      }
      expect(await ctx.backend.get(queue, first.id)).toMatchObject({ state: "active" });
      await expectNativeState(ctx, queue, first.id, "active");
    });

    it("reserve() on an empty queue returns no job", async () => {
      expect(await ctx.backend.reserve(ctx.queue(), { worker: "w" })).toEqual([]);
    });

    it("reserve({count}) claims up to count jobs in FIFO order, and never the same job twice", async () => {
      const queue = ctx.queue();
      const ids = (
        await ctx.backend.enqueueBulk(
          queue,
          [1, 2, 3].map((n) => ({ name: `n${n}` })),
        )
      ).map((r) => r.job.id);
      const firstTwo = await ctx.backend.reserve(queue, { worker: "w", count: 2 });
      expect(firstTwo.map((j) => j.id)).toEqual(ids.slice(0, 2));
      const rest = await ctx.backend.reserve(queue, { worker: "w", count: 5 });
      expect(rest.map((j) => j.id)).toEqual(ids.slice(2));
      expect(await ctx.backend.reserve(queue, { worker: "w" })).toEqual([]);
    });

    it("reserve() never hands out a job of another queue", async () => {
      const mine = ctx.queue();
      const other = ctx.queue();
      await ctx.backend.enqueue(other, { name: "elsewhere" });
      expect(await ctx.backend.reserve(mine, { worker: "w" })).toEqual([]);
      expect(await ctx.backend.reserve(other, { worker: "w" })).toHaveLength(1);
    });
  });
}
