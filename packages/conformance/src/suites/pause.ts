import { describe, expect, it } from "vitest";
import { type ConformanceOptions, titled, useBackend } from "../context.js";

export function pauseSuite(options: ConformanceOptions): void {
  const { title, skip } = titled(options, "pause and resume", ["pause"]);
  describe.skipIf(skip)(title, () => {
    const ctx = useBackend(options);

    it("a paused queue accepts jobs but hands none out until it is resumed", async () => {
      const queue = ctx.queue();
      await ctx.backend.enqueue(queue, { name: "before" });
      await ctx.backend.pause(queue);
      expect(await ctx.backend.isPaused(queue)).toBe(true);
      await ctx.backend.enqueue(queue, { name: "during" });
      expect(await ctx.backend.reserve(queue, { worker: "w" })).toEqual([]);
      await ctx.backend.resume(queue);
      expect(await ctx.backend.isPaused(queue)).toBe(false);
      expect(await ctx.backend.reserve(queue, { worker: "w", count: 2 })).toHaveLength(2);
    });

    it("pausing one queue leaves the others running", async () => {
      const paused = ctx.queue();
      const running = ctx.queue();
      await ctx.backend.enqueue(running, { name: "go" });
      await ctx.backend.pause(paused);
      expect(await ctx.backend.reserve(running, { worker: "w" })).toHaveLength(1);
      await ctx.backend.resume(paused);
    });
  });
}
