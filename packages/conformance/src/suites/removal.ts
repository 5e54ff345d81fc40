import { type Backend, type JobRemoval, hasJobRemoval } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { type ConformanceOptions, reserveOne, titled, useBackend } from "../context.js";

function removal(backend: Backend): Backend & JobRemoval {
  if (!hasJobRemoval(backend)) throw new Error("the backend has no remove()");
  return backend;
}

/** JobRemoval, where a backend has it (every adapter here does): a migration's move mode rests on it. */
export function removalSuite(options: ConformanceOptions): void {
  const { title } = titled(options, "removal");
  describe(title, () => {
    const ctx = useBackend(options);

    it("remove() deletes waiting, delayed, failed and completed jobs from the native store, and answers their ids", async (test) => {
      if (!hasJobRemoval(ctx.backend)) return test.skip("the backend has no remove()");
      const queue = ctx.queue();
      const results = await ctx.backend.enqueueBulk(queue, [
        { name: "waiting" },
        { name: "to-fail", maxAttempts: 1 },
        { name: "to-complete" },
        ...(ctx.backend.capabilities.delays ? [{ name: "delayed", delay: 60_000 }] : []),
      ]);
      const ids = results.map((result) => result.job.id);
      const failing = await reserveOne(ctx, queue, "w");
      await ctx.backend.fail(queue, failing.id, { worker: "w", error: { message: "x" }, retry: false });
      const completing = await reserveOne(ctx, queue, "w");
      await ctx.backend.complete(queue, completing.id, { worker: "w" });
      // A store that removes completed jobs itself (keepsCompleted: false) has one less to remove.
      const held = (await Promise.all(ids.map((id) => ctx.backend.get(queue, id)))).flatMap((job) => (job ? [job.id] : []));
      expect(held.length).toBe(ctx.backend.capabilities.keepsCompleted ? ids.length : ids.length - 1);
      const removed = await removal(ctx.backend).remove(queue, [...ids, "no-such-job"]);
      expect([...removed].sort()).toEqual([...held].sort());
      for (const id of ids) expect(await ctx.backend.get(queue, id)).toBeNull();
      expect(await ctx.probe.countJobs(queue)).toBe(0);
    });

    it("remove() leaves an active job to its worker, who still completes it", async (test) => {
      if (!hasJobRemoval(ctx.backend)) return test.skip("the backend has no remove()");
      const queue = ctx.queue();
      await ctx.backend.enqueueBulk(queue, [{ name: "running" }, { name: "idle" }]);
      const running = await reserveOne(ctx, queue, "w");
      const all = (await ctx.backend.list(queue, { state: "waiting" })).items.map((job) => job.id);
      const removed = await removal(ctx.backend).remove(queue, [running.id, ...all]);
      expect(removed).toEqual(all);
      expect((await ctx.backend.get(queue, running.id))?.state).toBe("active");
      await ctx.backend.complete(queue, running.id, { worker: "w" });
      expect(await removal(ctx.backend).remove(ctx.queue(), [running.id])).toEqual([]);
    });
  });
}
