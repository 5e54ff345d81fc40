import { describe, expect, it } from "vitest";
import { type ConformanceOptions, eventually, reserveOne, titled, useBackend } from "../context.js";

/** Which job reserve() hands out first when several kinds are due at once. */
export function claimOrderSuite(options: ConformanceOptions): void {
  const { title, skip } = titled(options, "claim order", ["leases", "priorities"]);
  describe.skipIf(skip)(title, () => {
    const ctx = useBackend(options);

    it("a job whose lease expired is handed out before a waiting job of higher priority", async () => {
      const queue = ctx.queue();
      const { job: abandoned } = await ctx.backend.enqueue(queue, { name: "abandoned", priority: 0 });
      await reserveOne(ctx, queue, "crashed-worker", 200);
      await ctx.backend.enqueue(queue, { name: "urgent", priority: 10 });
      // Wait for the lease to lapse as the store sees it, then ask for one job.
      await eventually(
        async () => ((await ctx.backend.get(queue, abandoned.id))?.lease?.expiresAt ?? 0) < Date.now() - 50,
        "the lease to expire",
      );
      const [first] = await ctx.backend.reserve(queue, { worker: "next-worker" });
      expect(first?.id).toBe(abandoned.id);
      expect(first?.attempts).toBe(2);
    });
  });
}
