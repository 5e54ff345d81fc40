import { randomUUID } from "node:crypto";
import { type Backend, type Recurrence, type RecurringJobs, ValidationError, hasRecurringJobs } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { type ConformanceOptions, titled, useBackend } from "../context.js";

function recurring(backend: Backend): Backend & RecurringJobs {
  if (!hasRecurringJobs(backend)) throw new Error("the backend keeps no recurring jobs");
  return backend;
}

function recurrenceIn(queue: string, fields: Partial<Recurrence> = {}): Recurrence {
  return {
    id: `r-${randomUUID().slice(0, 8)}`,
    queue,
    name: "Report",
    data: { to: ["ops"], n: 1.5, nested: { ok: true } },
    priority: 3,
    tags: ["nightly", "ops"],
    maxAttempts: 4,
    intervalMs: 60_000,
    nextAt: 1_700_000_000_000,
    count: 0,
    backlog: 0,
    native: { qless: { data: '{"to": ["ops"], "n": 1.5, "nested": {"ok": true}}' } },
    ...fields,
  };
}

/** RecurringJobs, where a store keeps recurring jobs' definitions (qless's `recur` on it). */
export function recurringSuite(options: ConformanceOptions): void {
  const { title } = titled(options, "recurring jobs");
  describe(title, () => {
    const ctx = useBackend(options);

    it("a recurrence put is read back field for field, and listed with its queue's, the next due first", async (test) => {
      if (!hasRecurringJobs(ctx.backend)) return test.skip("the backend keeps no recurring jobs");
      const store = recurring(ctx.backend);
      const queue = ctx.queue();
      const later = recurrenceIn(queue, { nextAt: 1_700_000_060_000.5, intervalMs: 500.25, backlog: 2 });
      const sooner = recurrenceIn(queue, { id: `${later.id}-a`, nextAt: 1_700_000_000_000 });
      const tie = recurrenceIn(queue, { id: `${later.id}-b`, nextAt: 1_700_000_000_000 });
      for (const recurrence of [later, tie, sooner]) await store.putRecurrence(recurrence);
      await store.putRecurrence(recurrenceIn(ctx.queue()));
      expect(await store.recurrence(later.id)).toEqual(later);
      expect((await store.recurrences(queue)).map((r) => r.id)).toEqual([sooner.id, tie.id, later.id]);
      expect(await store.recurrence("no-such-recurrence")).toBeNull();
    });

    it("putting an id again replaces it, in whichever queue it was", async (test) => {
      if (!hasRecurringJobs(ctx.backend)) return test.skip("the backend keeps no recurring jobs");
      const store = recurring(ctx.backend);
      const [from, to] = [ctx.queue(), ctx.queue()];
      const first = recurrenceIn(from);
      await store.putRecurrence(first);
      const moved = { ...first, queue: to, name: "Other", data: [], tags: [], count: 7, native: {} };
      await store.putRecurrence(moved);
      expect(await store.recurrences(from)).toEqual([]);
      expect(await store.recurrences(to)).toEqual([moved]);
    });

    it("advanceRecurrence moves count and next time only from the count the caller saw", async (test) => {
      if (!hasRecurringJobs(ctx.backend)) return test.skip("the backend keeps no recurring jobs");
      const store = recurring(ctx.backend);
      const recurrence = recurrenceIn(ctx.queue(), { count: 2 });
      await store.putRecurrence(recurrence);
      const next = recurrence.nextAt + 3 * recurrence.intervalMs;
      const outcomes = await Promise.all([
        store.advanceRecurrence(recurrence.id, 2, 5, next),
        store.advanceRecurrence(recurrence.id, 2, 5, next),
      ]);
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect(await store.recurrence(recurrence.id)).toEqual({ ...recurrence, count: 5, nextAt: next });
      expect(await store.advanceRecurrence(recurrence.id, 2, 6, next + 1)).toBe(false);
      expect(await store.advanceRecurrence("no-such-recurrence", 0, 1, next)).toBe(false);
    });

    it("removeRecurrence deletes it and says whether there was one", async (test) => {
      if (!hasRecurringJobs(ctx.backend)) return test.skip("the backend keeps no recurring jobs");
      const store = recurring(ctx.backend);
      const recurrence = recurrenceIn(ctx.queue());
      await store.putRecurrence(recurrence);
      expect(await store.removeRecurrence(recurrence.id)).toBe(true);
      expect(await store.removeRecurrence(recurrence.id)).toBe(false);
      expect(await store.recurrence(recurrence.id)).toBeNull();
      expect(await store.recurrences(recurrence.queue)).toEqual([]);
    });

    it("a recurrence the schema refuses is a ValidationError, and nothing is kept", async (test) => {
      if (!hasRecurringJobs(ctx.backend)) return test.skip("the backend keeps no recurring jobs");
      const store = recurring(ctx.backend);
      const queue = ctx.queue();
      for (const bad of [{ intervalMs: 0 }, { priority: 0.5 }, { maxAttempts: 0 }, { id: "" }, { tags: [""] }]) {
        const recurrence = recurrenceIn(queue, bad as Partial<Recurrence>);
        await expect(store.putRecurrence(recurrence)).rejects.toBeInstanceOf(ValidationError);
      }
      expect(await store.recurrences(queue)).toEqual([]);
    });
  });
}
