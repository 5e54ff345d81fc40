import { groupCommit } from "@switchyard/core";
import type { Knex } from "knex";
import { quoted, rowsOf } from "./bulk-insert.js";
import { SY } from "./columns.js";
import { withRetry, wroteNothing } from "./db-errors.js";
import { holdingQueues, queueNamesTable, queuesHoldingArgs, queuesHoldingStatement } from "./lookup.js";
import { type Statement, readAll } from "./mysql-script.js";
import type { Store } from "./options.js";
import { rowIdOf } from "./where.js";

/** Bounds one statement's arrays (PostgreSQL) or one script's statements (MySQL family). */
const MAX_GROUP_IDS = 1000;

/**
 * The JobLookup (`queuesHolding`) of PostgreSQL and the MySQL family as a group commit: the look-ups
 * that arrive while one is in flight go together next (a qless door asks on every put, so under load
 * each put would otherwise pay a statement and a round trip of its own). On PostgreSQL the group is
 * one statement; on MySQL and MariaDB one script of each id's own statement (the client's cost per
 * statement sent is what a put paid there), or each id's statement apart on a connection without
 * `multipleStatements`. Each caller gets the queues holding its own id, in name order, as a look-up
 * of its own would answer.
 */
export class GroupedQueueLookup {
  private readonly send: (key: string, id: string) => Promise<string[]>;

  constructor(store: Store) {
    const lookUp = store.dialect === "postgres" ? queuesHoldingEach : scriptOfLookUps;
    this.send = groupCommit((_key, ids: string[]) => withRetry("queuesHolding", () => lookUp(store, ids)), {
      take: (waiting) => Math.min(waiting.length, MAX_GROUP_IDS),
      // A value the server refuses (a NUL in an id) fails the group: each caller then asks alone.
      retryAlone: wroteNothing,
    });
  }

  static fits(store: Store): boolean {
    return store.dialect === "postgres" || store.dialect === "mysql";
  }

  queuesHolding(id: string): Promise<string[]> {
    return this.send("", id);
  }
}

/** MySQL family: each distinct id's queuesHoldingStatement, all in one script when the connection allows. */
async function scriptOfLookUps(store: Store, ids: string[]): Promise<string[][]> {
  const distinct = [...new Set(ids)];
  const reads: Statement[] = distinct.map((id) => {
    const { byRowId, bindings } = queuesHoldingArgs(id);
    return { sql: queuesHoldingStatement(store, byRowId), bindings };
  });
  const results = await readAll(store, reads);
  const holders = new Map(distinct.map((id, i) => [id, holdingQueues(store, results[i] as Array<{ name: string | null }>)]));
  return ids.map((id) => holders.get(id) ?? []);
}

/**
 * PostgreSQL: one statement for every id: the queue-name scan (one seek per next name in the queue index, as
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
