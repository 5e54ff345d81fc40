import { type EnqueueResult, type NormalizedEnqueueInput, groupCommit, runAtOf } from "@switchyard/core";
import type { Knex } from "knex";
import { quoted, rowsOf } from "./bulk-insert.js";
import { type JobRow, SY } from "./columns.js";
import { withRetry, wroteNothing } from "./db-errors.js";
import { findRows } from "./lookup.js";
import type { Store } from "./options.js";
import { enqueueRow, rowToJob } from "./row.js";
import { advanceIdCounter } from "./sequence.js";
import { rowIdOf } from "./where.js";

/** One caller's enqueue: its caller-chosen id and the row made from its input at its own clock. */
interface IdItem {
  id: string;
  row: Record<string, unknown>;
}

/** The stored row the caller's id names and whether this group wrote it, or `alone`: take the ordinary path. */
type IdOutcome = { row: JobRow; created: boolean } | { alone: true };

/** Bounds one statement's arrays (and the locks its rows take while it runs). */
const MAX_GROUP_ITEMS = 500;

/**
 * PostgreSQL enqueues with a caller-chosen id (a qless put's jid) as a group commit per queue (core's
 * groupCommit): those that arrive while the queue's statement runs go together in the next one, one
 * `INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING RETURNING *`. The ordinary path pays a
 * look-up and an insert per job; here the unique index (sy_queue, sy_job_id) is the look-up, and only
 * the ids it refused (a queue that held them) are read afterwards, in one statement. Jobs with a
 * unique key keep the ordinary path, which also frees keys of rows a legacy daemon finished.
 */
export class PostgresIdEnqueues {
  private readonly send: (queue: string, item: IdItem) => Promise<IdOutcome>;

  /** @param fallback the ordinary path, for a caller the group cannot answer (see `alone`). */
  constructor(
    private readonly store: Store,
    private readonly fallback: (queue: string, input: NormalizedEnqueueInput) => Promise<EnqueueResult>,
  ) {
    this.send = groupCommit((queue, items: IdItem[]) => writeGroup(store, queue, items), {
      take: (waiting) => Math.min(waiting.length, MAX_GROUP_ITEMS),
      // The statement writes all or nothing: a value the server refuses fails the group, and each
      // caller goes again alone to get its own answer. A lost connection may have committed the
      // rows, so its callers get that error rather than a second write.
      retryAlone: wroteNothing,
    });
  }

  static fits(store: Store): boolean {
    return store.dialect === "postgres" && store.layout.insertReturning;
  }

  /** Whether this input goes in a group: an id, and no unique key or dependencies. */
  static takes(input: NormalizedEnqueueInput): boolean {
    return input.id !== undefined && input.uniqueKey === undefined && input.dependsOn.length === 0;
  }

  async enqueue(queue: string, input: NormalizedEnqueueInput): Promise<EnqueueResult> {
    const id = input.id as string;
    const now = this.store.now();
    // A row that cannot be made (a value out of range) is refused to its caller alone, before any write.
    const row = enqueueRow(this.store, queue, input, runAtOf(input, now), now);
    // unnest() needs each column's type, as ready() read it; a column it did not see goes the ordinary way.
    if (!Object.keys(row).every((column) => this.store.layout.columnTypes.has(column))) return this.fallback(queue, input);
    const outcome = await this.send(queue, { id, row });
    if ("alone" in outcome) return this.fallback(queue, input);
    // As the ordinary path does: a numeric id moves the row-id counter past it (no statement otherwise).
    if (outcome.created) await advanceIdCounter(this.store, this.store.knex, [id]);
    return { job: rowToJob(this.store, outcome.row, now), created: outcome.created };
  }
}

/**
 * The group's rows, each id once (a repeated id gets its first caller's job, as it would one at a
 * time), in one insert; then the ids it did not write, read as the ordinary look-up reads them.
 */
async function writeGroup(store: Store, queue: string, items: IdItem[]): Promise<IdOutcome[]> {
  const first = new Map<string, IdItem>();
  for (const item of items) if (!first.has(item.id)) first.set(item.id, item);
  const { sql, bindings } = insertStatement(store, queue, [...first.values()]);
  const written = rowsOf(store, await withRetry("enqueue", () => store.knex.raw(sql, bindings)));
  const byId = new Map<string, { row: JobRow; created: boolean }>(written.map((row) => [String(row[SY.jobId]), { row, created: true }]));
  const held = [...first.keys()].filter((id) => !byId.has(id));
  if (held.length > 0) {
    const asked = new Set(held);
    try {
      for (const [id, row] of await withRetry("enqueue", () => findRows(store, store.knex, queue, held))) {
        if (asked.has(id)) byId.set(id, { row, created: false });
      }
    } catch {
      // Those callers wrote nothing: the ordinary path reads (or writes) theirs again, with its own errors.
    }
  }
  return items.map((item) => {
    const found = byId.get(item.id);
    // Not written and not found: a holder removed since, or a conflict on another unique index.
    if (!found) return { alone: true };
    return { row: found.row, created: found.created && first.get(item.id) === item };
  });
}

/**
 * `insert ... select from unnest(one array per column) on conflict do nothing returning *`: the
 * unique index (sy_queue, sy_job_id) skips an id the queue holds, even one a concurrent statement
 * of another process is writing (PostgreSQL waits for it, then skips). Two holders no unique index
 * sees are excluded by a guard: the default queue's legacy rows (sy_queue NULL) with the id, and,
 * for a numeric id, a row without a caller-chosen id whose row id it is (the ordinary look-up, in
 * where.ts, finds both). Each guard is a scalar subquery, one index seek per row: written as NOT
 * EXISTS it became an anti-join that read every legacy row (or every row of the queue) instead. No
 * conflict target, so a clash on any other unique index skips the row too, and its caller takes the
 * ordinary path, which names the error.
 */
function insertStatement(store: Store, queue: string, items: IdItem[]): { sql: string; bindings: Knex.RawBinding[] } {
  const rows = items.map((item) => item.row);
  const columns = [...new Set(rows.flatMap((row) => Object.keys(row)))];
  const names = columns.map((column) => quoted(store, column));
  const table = quoted(store, store.table);
  const arrays = columns.map((column) => `?::${store.layout.columnTypes.get(column)}[]`);
  const bindings: Knex.RawBinding[] = columns.map((column) => rows.map((row) => row[column] ?? null) as Knex.RawBinding);
  const jobId = quoted(store, SY.jobId);
  const queueColumn = quoted(store, SY.queue);
  const guards: string[] = [];
  const isDefault = queue === store.defaultQueue;
  if (isDefault) guards.push(`(select 1 from ${table} j where j.${queueColumn} is null and j.${jobId} = u.${jobId} limit 1) is null`);
  const rowIds = items.map((item) => rowIdOf(item.id));
  if (rowIds.some((rowId) => rowId !== null)) {
    arrays.push("?::int4[]");
    bindings.push(rowIds as Knex.RawBinding);
    names.push("sy_row_id");
    const inQueue = `(j.${queueColumn} = ?${isDefault ? ` or j.${queueColumn} is null` : ""})`;
    guards.push(`(select 1 from ${table} j where j.id = u.sy_row_id and j.${jobId} is null and ${inQueue} limit 1) is null`);
    bindings.push(queue);
  }
  const into = columns.map((column) => quoted(store, column)).join(", ");
  const selected = columns.map((column) => `u.${quoted(store, column)}`).join(", ");
  const where = guards.length > 0 ? ` where ${guards.join(" and ")}` : "";
  return {
    sql: `insert into ${table} (${into}) select ${selected} from unnest(${arrays.join(", ")}) as u(${names.join(", ")})${where} on conflict do nothing returning *`,
    bindings,
  };
}
