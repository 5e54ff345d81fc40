import { type Json, MAX_RUN_AT, ValidationError } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { type ConformanceOptions, expectNativeState, titled, useBackend } from "../context.js";

export function enqueueSuite(options: ConformanceOptions): void {
  const { title } = titled(options, "enqueue");
  describe(title, () => {
    const ctx = useBackend(options);

    it("enqueue(queue, job) stores a waiting job that get() returns field for field", async () => {
      const queue = ctx.queue();
      const before = Date.now();
      const { job, created } = await ctx.backend.enqueue(queue, { name: "send-email", data: { to: "a@example.com" } });
      expect(created).toBe(true);
      expect(job).toMatchObject({ queue, name: "send-email", data: { to: "a@example.com" }, state: "waiting", attempts: 0, lease: null });
      expect(job.createdAt).toBeGreaterThanOrEqual(before - 1000);
      expect(await ctx.backend.get(queue, job.id)).toMatchObject({
        id: job.id,
        name: "send-email",
        data: { to: "a@example.com" },
        state: "waiting",
      });
      await expectNativeState(ctx, queue, job.id, "waiting");
      expect(await ctx.probe.countJobs(queue)).toBe(1);
    });

    it("job data of every JSON type round-trips unchanged", async () => {
      const queue = ctx.queue();
      const data: Json = {
        text: 'héllo ✓ "quoted"\nline',
        int: 42,
        float: 3.25,
        negative: -7,
        yes: true,
        no: false,
        none: null,
        list: [1, "two", { three: 3 }],
        nested: { deep: { deeper: [] } },
      };
      const { job } = await ctx.backend.enqueue(queue, { name: "roundtrip", data });
      expect((await ctx.backend.get(queue, job.id))?.data).toEqual(data);
      const [reserved] = await ctx.backend.reserve(queue, { worker: "w" });
      expect(reserved?.data).toEqual(data);
    });

    it("native fields a producer gives (its extras, another system's fields) come back in Job.native unchanged, through get and reserve", async () => {
      const queue = ctx.queue();
      const extras = { origin: { app: "billing", ids: [1, 2] }, "x-trace": "abc", workerqueue: { taskable_type: "Photo", taskable_id: 7 } };
      const { job } = await ctx.backend.enqueue(queue, { name: "with-extras", native: extras });
      expect((await ctx.backend.get(queue, job.id))?.native).toMatchObject(extras);
      const [reserved] = await ctx.backend.reserve(queue, { worker: "w" });
      expect(reserved?.native).toMatchObject(extras);
    });

    it("the latest runAt the job model allows (MAX_RUN_AT) is stored and read back exactly; one past it is a ValidationError", async () => {
      const queue = ctx.queue();
      const { job } = await ctx.backend.enqueue(queue, { name: "far-future", runAt: MAX_RUN_AT });
      expect(job).toMatchObject({ state: "delayed", runAt: MAX_RUN_AT });
      expect((await ctx.backend.get(queue, job.id))?.runAt).toBe(MAX_RUN_AT);
      await expect(ctx.backend.enqueue(queue, { name: "too-far", runAt: MAX_RUN_AT + 1 })).rejects.toBeInstanceOf(ValidationError);
      expect(await ctx.probe.countJobs(queue)).toBe(1);
    });

    it("enqueueBulk(queue, jobs) creates every job with distinct ids, in order", async () => {
      const queue = ctx.queue();
      const results = await ctx.backend.enqueueBulk(
        queue,
        [1, 2, 3, 4, 5].map((n) => ({ name: "bulk", data: { n } })),
      );
      expect(results.map((r) => r.job.data)).toEqual([1, 2, 3, 4, 5].map((n) => ({ n })));
      expect(new Set(results.map((r) => r.job.id)).size).toBe(5);
      expect(await ctx.probe.countJobs(queue)).toBe(5);
      const reserved = await ctx.backend.reserve(queue, { worker: "w", count: 5 });
      expect(reserved.map((j) => j.data)).toEqual([1, 2, 3, 4, 5].map((n) => ({ n })));
    });

    it("enqueueBulk with one invalid job rejects the batch and writes nothing", async () => {
      const queue = ctx.queue();
      await expect(ctx.backend.enqueueBulk(queue, [{ name: "ok" }, { name: "" }, { name: "ok" }])).rejects.toMatchObject({
        code: "VALIDATION",
      });
      expect(await ctx.probe.countJobs(queue)).toBe(0);
    });

    it("enqueue with an empty name is a ValidationError and writes nothing", async () => {
      const queue = ctx.queue();
      await expect(ctx.backend.enqueue(queue, { name: "" })).rejects.toMatchObject({ code: "VALIDATION" });
      expect(await ctx.probe.countJobs(queue)).toBe(0);
    });

    it("an id, unique key or queue name holding a lone UTF-16 surrogate or NUL is a ValidationError, and nothing is written", async () => {
      const queue = ctx.queue();
      for (const bad of ["\ud800x", "x\udfff", "nul\u0000"]) {
        await expect(ctx.backend.enqueue(queue, { name: "x", id: bad })).rejects.toMatchObject({ code: "VALIDATION" });
        await expect(ctx.backend.enqueue(queue, { name: "x", uniqueKey: bad })).rejects.toMatchObject({ code: "VALIDATION" });
        await expect(ctx.backend.enqueue(`${queue}${bad}`, { name: "x" })).rejects.toMatchObject({ code: "VALIDATION" });
        await expect(ctx.backend.get(queue, bad)).rejects.toMatchObject({ code: "VALIDATION" });
      }
      expect(await ctx.probe.countJobs(queue)).toBe(0);
    });

    it("get(queue, id) of an unknown id returns null", async () => {
      expect(await ctx.backend.get(ctx.queue(), "999999999")).toBeNull();
    });

    it("queues() lists a queue once it has a job", async () => {
      const queue = ctx.queue();
      await ctx.backend.enqueue(queue, { name: "x" });
      expect(await ctx.backend.queues()).toContain(queue);
    });
  });

  const custom = titled(options, "enqueue with a caller-chosen id", ["customIds"]);
  describe.skipIf(custom.skip)(custom.title, () => {
    const ctx = useBackend(options);
    it("a job enqueued with an id keeps it; enqueueing the same id again returns the first job", async () => {
      const queue = ctx.queue();
      const first = await ctx.backend.enqueue(queue, { id: "order-42", name: "charge", data: 1 });
      expect(first).toMatchObject({ created: true, job: { id: "order-42" } });
      const again = await ctx.backend.enqueue(queue, { id: "order-42", name: "charge", data: 2 });
      expect(again).toMatchObject({ created: false, job: { id: "order-42", data: 1 } });
      expect(await ctx.probe.countJobs(queue)).toBe(1);
    });
  });
}
