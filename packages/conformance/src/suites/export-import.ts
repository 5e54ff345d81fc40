import { type Job, getMany, queueChecksum } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { type ConformanceOptions, reserveOne, titled, useBackend } from "../context.js";

async function exportAll(ctx: ReturnType<typeof useBackend>, queue: string, limit = 2): Promise<Job[]> {
  const jobs: Job[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await ctx.backend.export(queue, cursor === undefined ? { limit } : { limit, cursor });
    jobs.push(...result.items);
    if (result.cursor === null) return jobs;
    cursor = result.cursor;
  }
  throw new Error("export() never returned a null cursor");
}

const comparable = (job: Job) => ({
  id: job.id,
  name: job.name,
  data: job.data,
  attempts: job.attempts,
  createdAt: job.createdAt,
  priority: job.priority,
  maxAttempts: job.maxAttempts,
});

export function exportImportSuite(options: ConformanceOptions): void {
  const { title } = titled(options, "export and import");
  describe(title, () => {
    const ctx = useBackend(options);

    it("export() then import() into a fresh queue keeps ids, names, data, attempts and timestamps", async () => {
      const source = ctx.queue();
      const target = ctx.queue();
      await ctx.backend.enqueueBulk(source, [
        { name: "waiting-1", data: { n: 1 } },
        { name: "waiting-2", data: [1, 2] },
        { name: "to-fail", data: "text", maxAttempts: 1 },
        { name: "to-run", data: null },
      ]);
      const running = await reserveOne(ctx, source, "w");
      const failing = await reserveOne(ctx, source, "w");
      await ctx.backend.fail(source, failing.id, { worker: "w", error: { message: "bad" }, retry: false });
      const exported = await exportAll(ctx, source);
      expect(exported).toHaveLength(4);
      const result = await ctx.backend.import(target, exported);
      expect(result).toMatchObject({ imported: 4, skipped: [] });
      const imported = await exportAll(ctx, target);
      const byId = (jobs: Job[]) => [...jobs].sort((a, b) => a.id.localeCompare(b.id));
      expect(byId(imported).map(comparable)).toEqual(byId(exported).map(comparable));
      expect(imported.every((j) => j.queue === target)).toBe(true);
      const states = Object.fromEntries(imported.map((j) => [j.id, j.state]));
      expect(states[failing.id]).toBe("failed");
      expect(states[running.id]).toBe("waiting");
      expect((await ctx.backend.get(target, failing.id))?.error?.message).toBe("bad");
    });

    it("import() of jobs whose ids already exist skips them, so an interrupted migration can resume", async () => {
      const source = ctx.queue();
      const target = ctx.queue();
      await ctx.backend.enqueueBulk(source, [{ name: "a" }, { name: "b" }]);
      const exported = await exportAll(ctx, source);
      await ctx.backend.import(target, exported.slice(0, 1));
      const result = await ctx.backend.import(target, exported);
      expect(result.imported).toBe(1);
      expect(result.skipped).toEqual([exported[0]?.id]);
      expect(await ctx.probe.countJobs(target)).toBe(2);
    });

    it("a page imported at once keeps the checksum of what was exported, state by state", async () => {
      const source = ctx.queue();
      const target = ctx.queue();
      await ctx.backend.enqueueBulk(
        source,
        Array.from({ length: 25 }, (_, i) => ({ name: `job-${i}`, data: { i, nested: { b: 1, a: [i] } }, priority: i % 3 })),
      );
      await ctx.backend.fail(source, (await reserveOne(ctx, source, "w")).id, { worker: "w", error: { message: "x" }, retry: false });
      // Taken first: in qless a jid is global, so importing it into another queue moves it there.
      const before = await queueChecksum(ctx.backend, source);
      await ctx.backend.import(target, await exportAll(ctx, source));
      expect(await queueChecksum(ctx.backend, target)).toEqual(before);
      expect([before.waiting.jobs, before.failed.jobs]).toEqual([24, 1]);
    });

    it("import() of a page larger than any one statement takes (1,200 jobs) writes every job, read back in one getMany", async () => {
      const source = ctx.queue();
      const target = ctx.queue();
      const jobs = Array.from({ length: 1_200 }, (_, i) => ({ name: `bulk-${i}`, data: { i } }));
      for (let i = 0; i < jobs.length; i += 400) await ctx.backend.enqueueBulk(source, jobs.slice(i, i + 400));
      const exported = await exportAll(ctx, source, 1_000);
      expect(await ctx.backend.import(target, exported)).toMatchObject({ imported: 1_200, skipped: [] });
      const held = await getMany(
        ctx.backend,
        target,
        exported.map((job) => job.id),
      );
      expect(held.map((job) => job?.name)).toEqual(exported.map((job) => job.name));
      expect(await ctx.probe.countJobs(target)).toBe(1_200);
    });

    it("getMany, where a backend has it, answers each id's job in order and null for an unknown id, as get() does", async (test) => {
      if (!ctx.backend.getMany) return test.skip("the backend reads jobs one get() at a time");
      const queue = ctx.queue();
      const [a, b] = await ctx.backend.enqueueBulk(queue, [{ name: "a" }, { name: "b" }]);
      const got = await ctx.backend.getMany(queue, [b!.job.id, "no-such-job", a!.job.id]);
      expect(got).toEqual([await ctx.backend.get(queue, b!.job.id), null, await ctx.backend.get(queue, a!.job.id)]);
      await expect(ctx.backend.getMany(ctx.queue(), [a!.job.id])).resolves.toEqual([null]);
    });
  });
}
