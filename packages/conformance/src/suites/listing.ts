import type { Job } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { type ConformanceOptions, reserveOne, titled, useBackend } from "../context.js";

export function listingSuite(options: ConformanceOptions): void {
  const { title } = titled(options, "counts and listing");
  describe(title, () => {
    const ctx = useBackend(options);

    it("counts() reports how many jobs are in each state", async () => {
      const queue = ctx.queue();
      await ctx.backend.enqueueBulk(
        queue,
        [1, 2, 3, 4].map((n) => ({ name: `j${n}`, maxAttempts: 1 })),
      );
      const active = await reserveOne(ctx, queue, "w");
      const toFail = await reserveOne(ctx, queue, "w");
      await ctx.backend.fail(queue, toFail.id, { worker: "w", error: { message: "no" } });
      const counts = await ctx.backend.counts(queue);
      expect(counts).toMatchObject({ waiting: 2, active: 1, failed: 1 });
      expect(Object.keys(counts).sort()).toEqual(["active", "blocked", "canceled", "completed", "delayed", "failed", "waiting"]);
      await ctx.backend.complete(queue, active.id, { worker: "w" });
      const after = await ctx.backend.counts(queue);
      expect(after.active).toBe(0);
      if (ctx.capabilities.keepsCompleted) expect(after.completed).toBe(1);
    });

    it("list({state, limit}) pages through every job in that state exactly once, ending with a null cursor", async () => {
      const queue = ctx.queue();
      const ids = (
        await ctx.backend.enqueueBulk(
          queue,
          [1, 2, 3, 4, 5].map((n) => ({ name: `j${n}` })),
        )
      ).map((r) => r.job.id);
      const seen: Job[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 10; page++) {
        const result = await ctx.backend.list(
          queue,
          cursor === undefined ? { state: "waiting", limit: 2 } : { state: "waiting", limit: 2, cursor },
        );
        expect(result.items.length).toBeLessThanOrEqual(2);
        seen.push(...result.items);
        if (result.cursor === null) break;
        cursor = result.cursor;
      }
      expect(seen.map((j) => j.id).sort()).toEqual([...ids].sort());
      expect(seen.every((j) => j.state === "waiting")).toBe(true);
    });

    it("list({state: 'active'}) shows reserved jobs and not waiting ones", async () => {
      const queue = ctx.queue();
      await ctx.backend.enqueueBulk(queue, [{ name: "a" }, { name: "b" }]);
      const reserved = await reserveOne(ctx, queue, "w");
      const { items } = await ctx.backend.list(queue, { state: "active" });
      expect(items.map((j) => j.id)).toEqual([reserved.id]);
    });
  });
}
