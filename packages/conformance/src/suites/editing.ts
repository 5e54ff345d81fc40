import { type Backend, type JobEditing, NotFoundError, ValidationError, hasJobEditing } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { type ConformanceOptions, expectNativeState, reserveOne, titled, useBackend } from "../context.js";

function editing(backend: Backend): Backend & JobEditing {
  if (!hasJobEditing(backend)) throw new Error("backend declares editing: true but lacks setPriority, setTags or replace");
  return backend;
}

export function editingSuite(options: ConformanceOptions): void {
  const { title, skip } = titled(options, "editing", ["editing"]);
  describe.skipIf(skip)(title, () => {
    const ctx = useBackend(options);

    it("setPriority() moves a waiting job to its new place in the claim order", async () => {
      const queue = ctx.queue();
      const { job: first } = await ctx.backend.enqueue(queue, { name: "first" });
      const { job: second } = await ctx.backend.enqueue(queue, { name: "second" });
      expect((await editing(ctx.backend).setPriority(queue, second.id, 10)).priority).toBe(10);
      const [claimed] = await ctx.backend.reserve(queue, { worker: "w" });
      expect(claimed?.id).toBe(second.id);
      expect((await ctx.backend.get(queue, first.id))?.priority).toBe(0);
    });

    it("setTags() replaces the tags; an unknown job is a NotFoundError and a bad priority a ValidationError", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "tagged", tags: ["a"] });
      expect((await editing(ctx.backend).setTags(queue, job.id, ["b", "c"])).tags).toEqual(["b", "c"]);
      expect((await ctx.backend.get(queue, job.id))?.tags).toEqual(["b", "c"]);
      expect((await editing(ctx.backend).setTags(queue, job.id, [])).tags).toEqual([]);
      await expect(editing(ctx.backend).setTags(queue, "no-such-job", ["x"])).rejects.toBeInstanceOf(NotFoundError);
      await expect(editing(ctx.backend).setPriority(queue, job.id, 1.5)).rejects.toBeInstanceOf(ValidationError);
    });

    it("replace() puts a finished job back as new under the same id: waiting, no attempts, error or result, new name and data", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { id: "re-put-1", name: "old", data: { v: 1 }, maxAttempts: 1 });
      await reserveOne(ctx, queue, "w");
      await ctx.backend.fail(queue, job.id, { worker: "w", error: { message: "boom" } });
      const again = await editing(ctx.backend).replace(queue, job.id, { name: "new", data: { v: 2 }, priority: 3 });
      expect(again).toMatchObject({
        id: job.id,
        name: "new",
        data: { v: 2 },
        priority: 3,
        state: "waiting",
        attempts: 0,
        error: null,
        result: null,
      });
      await expectNativeState(ctx, queue, job.id, "waiting");
      expect(await ctx.probe.countJobs(queue)).toBe(1);
      const [claimed] = await ctx.backend.reserve(queue, { worker: "w2" });
      expect(claimed).toMatchObject({ id: job.id, name: "new", attempts: 1 });
    });

    it("replace() of an active job takes it from its worker, and can delay it", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "running" });
      await reserveOne(ctx, queue, "w");
      const later = await editing(ctx.backend).replace(queue, job.id, { name: "running", delay: 60_000 });
      expect(later).toMatchObject({ state: "delayed", lease: null });
      await expect(ctx.backend.complete(queue, job.id, { worker: "w" })).rejects.toThrow();
      expect(await ctx.backend.reserve(queue, { worker: "w2" })).toEqual([]);
    });
  });
}
