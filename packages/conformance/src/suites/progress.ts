import { describe, expect, it } from "vitest";
import { type ConformanceOptions, reserveOne, titled, useBackend } from "../context.js";

export function progressSuite(options: ConformanceOptions): void {
  const { title, skip } = titled(options, "progress", ["progress"]);
  describe.skipIf(skip)(title, () => {
    const ctx = useBackend(options);
    it("setProgress() on an active job is visible through get()", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "upload" });
      await reserveOne(ctx, queue, "w");
      if (!ctx.backend.setProgress) throw new Error("backend declares progress: true but has no setProgress()");
      await ctx.backend.setProgress(queue, job.id, { worker: "w", progress: { percent: 40 } });
      expect((await ctx.backend.get(queue, job.id))?.progress).toEqual({ percent: 40 });
    });
  });
}
