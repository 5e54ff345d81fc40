import { describe, expect, it } from "vitest";
import { type ConformanceOptions, titled, useBackend } from "../context.js";

/** Page cursors are the backend's own and opaque: what a caller forges is refused, never guessed at. */
export function cursorSuite(options: ConformanceOptions): void {
  const { title } = titled(options, "cursors");
  describe(title, () => {
    const ctx = useBackend(options);

    it("a cursor that no page handed out is a ValidationError on list() and export()", async () => {
      const queue = ctx.queue();
      await ctx.backend.enqueueBulk(queue, [{ name: "a" }, { name: "b" }]);
      for (const forged of ["not-a-cursor", "eyJ4IjoxfQ", "%%%"]) {
        await expect(ctx.backend.list(queue, { state: "waiting", limit: 1, cursor: forged })).rejects.toMatchObject({ code: "VALIDATION" });
        await expect(ctx.backend.export(queue, { limit: 1, cursor: forged })).rejects.toMatchObject({ code: "VALIDATION" });
      }
    });

    it("export() pages survive a cancel between pages: every other job is still exported once", async () => {
      const queue = ctx.queue();
      const ids = (
        await ctx.backend.enqueueBulk(
          queue,
          [1, 2, 3, 4, 5, 6].map((n) => ({ name: `j${n}` })),
        )
      ).map((r) => r.job.id);
      const first = await ctx.backend.export(queue, { limit: 2 });
      const gone = first.items[0]?.id;
      if (gone === undefined) throw new Error("export() returned an empty first page");
      await ctx.backend.cancel(queue, gone);
      const seen = first.items.map((job) => job.id);
      let cursor = first.cursor;
      while (cursor !== null) {
        const page = await ctx.backend.export(queue, { limit: 2, cursor });
        seen.push(...page.items.map((job) => job.id));
        cursor = page.cursor;
      }
      expect(new Set(seen).size).toBe(seen.length);
      expect(ids.filter((id) => id !== gone).every((id) => seen.includes(id))).toBe(true);
    });
  });
}
