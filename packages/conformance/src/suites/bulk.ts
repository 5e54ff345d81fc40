import { describe, expect, it } from "vitest";
import { type ConformanceOptions, titled, useBackend } from "../context.js";

/** enqueueBulk decides each item as a run of single enqueues would, in order, but in one step. */
export function bulkSuite(options: ConformanceOptions): void {
  const keys = titled(options, "enqueueBulk with unique keys", ["uniqueKeys"]);
  describe.skipIf(keys.skip)(keys.title, () => {
    const ctx = useBackend(options);
    it("a later item with the unique key an earlier item of the batch took gets that job", async () => {
      const queue = ctx.queue();
      const [first, second, third] = await ctx.backend.enqueueBulk(queue, [
        { name: "a", data: 1, uniqueKey: "k" },
        { name: "b", data: 2, uniqueKey: "k" },
        { name: "c", data: 3 },
      ]);
      expect(first?.created).toBe(true);
      expect(second).toMatchObject({ created: false, job: { id: first?.job.id, data: 1 } });
      expect(third?.created).toBe(true);
      expect(await ctx.probe.countJobs(queue)).toBe(2);
    });
  });

  const ids = titled(options, "enqueueBulk with caller-chosen ids", ["customIds"]);
  describe.skipIf(ids.skip)(ids.title, () => {
    const ctx = useBackend(options);
    it("a later item with an id an earlier item of the batch took gets that job", async () => {
      const queue = ctx.queue();
      const id = `${queue}-a`;
      const [first, second] = await ctx.backend.enqueueBulk(queue, [
        { id, name: "a", data: 1 },
        { id, name: "again", data: 2 },
      ]);
      expect(first).toMatchObject({ created: true, job: { id } });
      expect(second).toMatchObject({ created: false, job: { id, data: 1 } });
      expect(await ctx.probe.countJobs(queue)).toBe(1);
    });
  });

  const deps = titled(options, "enqueueBulk with dependencies", ["dependencies", "customIds"]);
  describe.skipIf(deps.skip)(deps.title, () => {
    const ctx = useBackend(options);
    it("a job may depend on an earlier job of the same batch, and is blocked until it completes", async () => {
      const queue = ctx.queue();
      const parent = `${queue}-parent`;
      const [, child] = await ctx.backend.enqueueBulk(queue, [
        { id: parent, name: "parent" },
        { id: `${queue}-child`, name: "child", dependsOn: [parent] },
      ]);
      expect(child?.job.state).toBe("blocked");
      const reserved = await ctx.backend.reserve(queue, { worker: "w", count: 2 });
      expect(reserved.map((job) => job.id)).toEqual([parent]);
      await ctx.backend.complete(queue, parent, { worker: "w" });
      expect((await ctx.backend.get(queue, `${queue}-child`))?.state).toBe("waiting");
    });
  });
}
