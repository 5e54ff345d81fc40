import { z } from "zod";
import type { Backend } from "./backend.js";
import { JobIdSchema, QueueNameSchema } from "./inputs.js";
import { JsonSchema, PrioritySchema, TagsSchema } from "./job.js";

/**
 * A job that recurs, as qless's `recur` defines one (`ql:r:<jid>`): an instance of it joins `queue`
 * every `intervalMs`, named `<id>-<n>` for its n-th instance. The store keeps the definition; the
 * instances are added by whoever pops the queue when they are due (the qless doors), so a store
 * needs no timer of its own. Ids are the store's, not a queue's, as qless's jids are global.
 */
export const RecurrenceSchema = z.object({
  id: JobIdSchema,
  queue: QueueNameSchema,
  name: z.string(),
  data: JsonSchema,
  priority: PrioritySchema,
  tags: TagsSchema,
  maxAttempts: z.number().int().positive(),
  /** Milliseconds between instances; qless's interval may be a fraction of a second. */
  intervalMs: z.number().positive(),
  /** When the next instance is due, epoch ms. */
  nextAt: z.number(),
  /** How many instances were added so far: the next is `<id>-<count + 1>`. */
  count: z.number().int().nonnegative(),
  /** At most this many overdue instances are added at one look (qless's `backlog`); 0: all of them. */
  backlog: z.number().nonnegative(),
  /** What the defining system keeps beside (qless's data text as its client spelled it). */
  native: z.record(z.string(), z.unknown()),
});
export type Recurrence = z.infer<typeof RecurrenceSchema>;

/** Where a store keeps recurring jobs' definitions (qless's `recur` on a store that is not qless). */
export interface RecurringJobs {
  /** Creates the recurrence, or replaces the one with its id, whichever queue that was in. */
  putRecurrence(recurrence: Recurrence): Promise<void>;
  recurrence(id: string): Promise<Recurrence | null>;
  /** The recurrences of `queue`, the next due first (then by id, as qless's sorted set orders ties). */
  recurrences(queue: string): Promise<Recurrence[]>;
  /** false when there was none. */
  removeRecurrence(id: string): Promise<boolean>;
  /**
   * Records instances added: `count` and `nextAt` are set only while the stored count is still
   * `seen`, so of two callers adding the same instances one advances it and the other is told false.
   */
  advanceRecurrence(id: string, seen: number, count: number, nextAt: number): Promise<boolean>;
}

/**
 * The order `recurrences` answers in: the next due first, then by id in byte order, as a Redis sorted
 * set orders members of equal score (for a store that sorts what it read).
 */
export function byNextRun(a: Recurrence, b: Recurrence): number {
  return a.nextAt - b.nextAt || Buffer.compare(Buffer.from(a.id), Buffer.from(b.id));
}

export function hasRecurringJobs(backend: Backend): backend is Backend & RecurringJobs {
  const store = backend as Partial<RecurringJobs>;
  return typeof store.putRecurrence === "function" && typeof store.recurrences === "function";
}
