import { groupCommit } from "@switchyard/core";
import type { Knex } from "knex";
import { quoted, rowsOf } from "./bulk-insert.js";
import { SY } from "./columns.js";
import { withRetry, wroteNothing } from "./db-errors.js";
import { queueNamesTable } from "./lookup.js";
import type { Store } from "./options.js";
import { rowIdOf } from "./where.js";

/** Bounds one statement's arrays. */
const MAX_GROUP_IDS = 1000;

/**
 * PostgreSQL's JobLookup (`queuesHolding`) as a group commit: the look-ups that arrive while one is
 * in flight go together in the next statement (a qless door asks on every put, so under load each
 * put would otherwise pay a statement of its own). Each caller gets the queues holding its own id,
 * in name order, as a look-up of its own would answer.
 */
export class PostgresQueueLookup {
  private readonly send: (key: string, id: string) => Promise<string[]>;

  constructor(store: Store) {
    this.send = groupCommit((_key, ids: string[]) => withRetry("queuesHolding", () => queuesHoldingEach(store, ids)), {
      take: (waiting) => Math.min(waiting.length, MAX_GROUP_IDS),
      // A value the server refuses (a NUL in an id) fails the group: each caller then asks alone.
      retryAlone: wroteNothing,
    });
  }

  static fits(store: Store): boolean {
    return store.dialect === "postgres";
  }

  queuesHolding(id: string): Promise<string[]> {
    return this.send("", id);
  }
}

/**
 * One statement for every id: the queue-name scan (one seek per next name in the queue index, as
 * queues() reads it), then one seek in the (queue, job id) index per name and id (the `limit 1`
 * keeps the lateral from being flattened into a join, which PostgreSQL answered with a scan of the
 * whole table); the default queue's rows without a queue, by the same index; and, for numeric ids,
 * the row without a caller-chosen id whose row id it is (in any queue). Values go as array
 * bindings, so the text and plan do not grow with the group.
 */
async function queuesHoldingEach(store: Store, ids: string[]): Promise<string[][]> {
  const table = quoted(store, store.table);
  const queue = quoted(store, SY.queue);
  const jobId = quoted(store, SY.jobId);
  const distinct = [...new Set(ids)];
  const rowIds = distinct.map(rowIdOf).filter((rowId): rowId is number => rowId !== null);
  const bindings: Knex.RawBinding[] = [distinct as unknown as Knex.RawBinding, distinct as unknown as Knex.RawBinding];
  let sql = `${queueNamesTable(store)}
    select names.name as queue, x.id from names cross join unnest(?::text[]) as x(id)
      cross join lateral (select 1 from ${table} j where j.${queue} = names.name and j.${jobId} = x.id limit 1) hit
    union all select null, x.id from unnest(?::text[]) as x(id)
      cross join lateral (select 1 from ${table} j where j.${queue} is null and j.${jobId} = x.id limit 1) hit`;
  if (rowIds.length > 0) {
    sql += `\n    union all select ${queue}, id::text from ${table} where ${jobId} is null and id = any(?::int4[])`;
    bindings.push(rowIds as unknown as Knex.RawBinding);
  }
  const holders = new Map<string, Set<string>>();
  for (const row of rowsOf(store, await store.knex.raw(sql, bindings)) as unknown as Array<{ queue: string | null; id: string }>) {
    const id = String(row.id);
    const names = holders.get(id) ?? new Set<string>();
    names.add(row.queue ?? store.defaultQueue);
    holders.set(id, names);
  }
  return ids.map((id) => [...(holders.get(id) ?? [])].sort());
}
