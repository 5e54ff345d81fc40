import { type Recurrence, byNextRun } from "@switchyard/core";
import type { Store } from "./options.js";

/**
 * Recurring jobs' definitions (core's RecurringJobs; qless's `recur` on a Worker Queue store), one row
 * each in a side table beside the jobs (`<table>_sy_recurring`), which workq's daemons never read.
 * Data, tags and native fields are JSON text; times and the interval are doubles, since qless's
 * `recur` takes fractions of a second.
 */
export async function createRecurringTable(store: Store): Promise<void> {
  const { knex, recurringTable: table } = store;
  if (await knex.schema.hasTable(table)) return;
  await knex.schema.createTable(table, (t) => {
    // qless's jids are case-sensitive: MySQL's default collation would make `Jid` and `jid` one key.
    const id = t.string("id", 255).primary();
    if (store.dialect === "mysql") id.collate("utf8mb4_bin");
    t.string("queue", 255).notNullable();
    t.text("name").notNullable();
    t.text("data").notNullable();
    t.integer("priority").notNullable();
    t.text("tags").notNullable();
    t.integer("max_attempts").notNullable();
    t.double("interval_ms").notNullable();
    t.double("next_at").notNullable();
    t.integer("count").notNullable();
    t.double("backlog").notNullable();
    t.text("native").notNullable();
    t.index(["queue", "next_at"], `${table}_queue_next_idx`);
  });
}

interface RecurrenceRow {
  id: string;
  queue: string;
  name: string;
  data: string;
  priority: number;
  tags: string;
  max_attempts: number;
  interval_ms: number | string;
  next_at: number | string;
  count: number;
  backlog: number | string;
}

function toRow(recurrence: Recurrence): Record<string, unknown> {
  return {
    id: recurrence.id,
    queue: recurrence.queue,
    name: recurrence.name,
    data: JSON.stringify(recurrence.data),
    priority: recurrence.priority,
    tags: JSON.stringify(recurrence.tags),
    max_attempts: recurrence.maxAttempts,
    interval_ms: recurrence.intervalMs,
    next_at: recurrence.nextAt,
    count: recurrence.count,
    backlog: recurrence.backlog,
    native: JSON.stringify(recurrence.native),
  };
}

function fromRow(row: RecurrenceRow & { native: string }): Recurrence {
  return {
    id: row.id,
    queue: row.queue,
    name: row.name,
    data: JSON.parse(row.data),
    priority: Number(row.priority),
    tags: JSON.parse(row.tags),
    maxAttempts: Number(row.max_attempts),
    // pg answers doubles as numbers, mysql2 as numbers; both parsed the same for safety.
    intervalMs: Number(row.interval_ms),
    nextAt: Number(row.next_at),
    count: Number(row.count),
    backlog: Number(row.backlog),
    native: JSON.parse(row.native),
  };
}

export async function putRecurrence(store: Store, recurrence: Recurrence): Promise<void> {
  const row = toRow(recurrence);
  await store.knex(store.recurringTable).insert(row).onConflict("id").merge();
}

export async function findRecurrence(store: Store, id: string): Promise<Recurrence | null> {
  const row = await store.knex(store.recurringTable).where("id", id).first();
  return row ? fromRow(row) : null;
}

/** The queue's recurrences, next due first; ties by id in byte order, as Redis orders a sorted set's (collations would not). */
export async function queueRecurrences(store: Store, queue: string): Promise<Recurrence[]> {
  const rows = await store.knex(store.recurringTable).where("queue", queue);
  return rows.map(fromRow).sort(byNextRun);
}

export async function removeRecurrence(store: Store, id: string): Promise<boolean> {
  return (await store.knex(store.recurringTable).where("id", id).delete()) > 0;
}

/** One guarded UPDATE: of two callers that saw the same count, the second matches no row. */
export async function advanceRecurrence(store: Store, id: string, seen: number, count: number, nextAt: number): Promise<boolean> {
  const changed = await store.knex(store.recurringTable).where({ id, count: seen }).update({ count, next_at: nextAt });
  return changed > 0;
}
