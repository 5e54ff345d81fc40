import { ValidationError } from "@switchyard/core";
import type { Knex } from "knex";
import { quoted } from "./bulk-insert.js";
import { type Condition, queueCondition, queueSpellings } from "./claim.js";
import type { JobRow } from "./columns.js";
import { SY } from "./columns.js";
import type { Store } from "./options.js";
import { rowIdOf, whereQueue } from "./where.js";

export type Db = Knex | Knex.Transaction;

/**
 * The queue names as a `names` table, read by a loose index scan: each next name is one seek in the
 * queue index, so the cost grows with the number of queues, not of rows (a plain DISTINCT reads
 * every row on PostgreSQL and SQLite: milliseconds at 100,000 jobs, and the qless doors look a jid
 * up on every put). There the scan is spelled as a recursive query; MySQL and MariaDB make one of a
 * DISTINCT themselves ("Using index for group-by"), but seek nothing for the recursive spelling's
 * correlated `min(...) where queue > name`: they read the whole index at each step (20 queues of 500
 * jobs: 24 ms against 0.5 ms). Rows without a queue (the default queue's) are not among the names.
 */
export function queueNamesTable(store: Store): string {
  const table = quoted(store, store.table);
  const queue = quoted(store, SY.queue);
  if (store.dialect === "mysql") return `with names(name) as (select distinct ${queue} from ${table} where ${queue} is not null)`;
  return `with recursive names(name) as (
      select min(${queue}) from ${table}
      union all
      select (select min(${queue}) from ${table} where ${queue} > names.name) from names where names.name is not null
    )`;
}

/**
 * The queues holding a job under `id` (JobLookup) as one statement, one `name` per row found (null
 * for a row without a queue, the default queue's): each queue name's seek in the (queue, job id)
 * index, the rows without a queue by the same index, and with `byRowId` the row whose integer id
 * the id spells, when it has no caller-chosen id. Bindings: the id twice, then its row id.
 */
export function queuesHoldingStatement(store: Store, byRowId: boolean): string {
  const table = quoted(store, store.table);
  const queue = quoted(store, SY.queue);
  const jobId = quoted(store, SY.jobId);
  const holding = `${queueNamesTable(store)}
    select names.name as name from names join ${table} j on j.${queue} = names.name and j.${jobId} = ?
    union all select null from ${table} where ${queue} is null and ${jobId} = ?`;
  return byRowId ? `${holding}\n    union all select ${queue} from ${table} where ${jobId} is null and id = ?` : holding;
}

/** Which queuesHoldingStatement `id` needs (whether it also spells a row id), and its bindings. */
export function queuesHoldingArgs(id: string): { byRowId: boolean; bindings: Array<string | number> } {
  const rowId = rowIdOf(id);
  return rowId === null ? { byRowId: false, bindings: [id, id] } : { byRowId: true, bindings: [id, id, rowId] };
}

/** queuesHoldingStatement's rows as queuesHolding answers them: each queue once, in name order. */
export function holdingQueues(store: Store, rows: ReadonlyArray<{ name: string | null }>): string[] {
  return [...new Set(rows.map((row) => row.name ?? store.defaultQueue))].sort();
}

/**
 * The row id a job id names in a queue, as one scalar expression each of whose reads is an index
 * lookup: the row that has it as its caller-chosen id (`sy_job_id`, per spelling of the queue), else
 * the row whose integer id it is, when that row has no caller-chosen id. A caller-chosen id wins over
 * a row id of the same spelling (see sequence.ts for why both are rare); an id that is not a row id
 * (rowIdOf) never reaches the integer column, where PostgreSQL would refuse it. The two as one OR
 * under the queue's condition is read by SQLite (and MySQL) through every row of the queue in the
 * (sy_queue, sy_job_id) index, at every get and completion. `latest` (MySQL): each read is a
 * locking one, which sees what other transactions committed since this one began.
 */
export function jobRowId(store: Store, queue: string, id: string, latest = false): Condition {
  const table = quoted(store, store.table);
  const lock = latest && store.dialect === "mysql" ? " lock in share mode" : "";
  const reads: Condition[] = queueSpellings(store, queue).map((spelling) => ({
    sql: `(select id from ${table} where ${spelling.sql} and ${SY.jobId} = ?${lock})`,
    bindings: [...spelling.bindings, id],
  }));
  const rowId = rowIdOf(id);
  if (rowId !== null) {
    const inQueue = queueCondition(store, queue);
    reads.push({
      sql: `(select id from ${table} where id = ? and ${SY.jobId} is null and ${inQueue.sql}${lock})`,
      bindings: [rowId, ...inQueue.bindings],
    });
  }
  if (reads.length === 1) return reads[0]!;
  return { sql: `coalesce(${reads.map((read) => read.sql).join(", ")})`, bindings: reads.flatMap((read) => read.bindings) };
}

/** The SELECT of findRow() as text and bindings (for a statement run on a connection directly). */
export function rowOfId(store: Store, queue: string, id: string): Condition {
  const rowId = jobRowId(store, queue, id);
  return { sql: `select * from ${quoted(store, store.table)} where id = ${rowId.sql}`, bindings: rowId.bindings };
}

/** The row of a job id in a queue, or null. */
export async function findRow(store: Store, db: Db, queue: string, id: string, latest = false): Promise<JobRow | null> {
  const rowId = jobRowId(store, queue, id, latest);
  const rows = (await latestRead(store, db(store.table).select("*").whereRaw(`id = ${rowId.sql}`, rowId.bindings), latest)) as JobRow[];
  return rows[0] ?? null;
}

/**
 * The rows of these ids in a queue, in one statement: by caller-chosen id (sy_job_id), or by row id
 * for a row that has none, each an index read (as jobRowId's, whose OR would read the whole queue).
 * Keyed by job id; a caller-chosen id wins over a row id of the same spelling.
 */
export async function findRows(store: Store, db: Db, queue: string, ids: string[]): Promise<Map<string, JobRow>> {
  const found = new Map<string, JobRow>();
  if (ids.length === 0) return found;
  const rowIds = ids.map(rowIdOf).filter((rowId): rowId is number => rowId !== null);
  const rows =
    store.dialect === "postgres" ? await postgresRows(store, db, queue, ids, rowIds) : await rowsOfIds(store, db, queue, ids, rowIds);
  for (const row of rows) {
    const own = row[SY.jobId] as string | null;
    if (own !== null && own !== undefined) found.set(own, row);
    else if (!found.has(String(row.id))) found.set(String(row.id), row);
  }
  return found;
}

function rowsOfIds(store: Store, db: Db, queue: string, ids: string[], rowIds: number[]): Promise<JobRow[]> {
  const [first, ...others] = queueSpellings(store, queue).map((spelling) =>
    db(store.table).select("*").whereRaw(spelling.sql, spelling.bindings).whereIn(SY.jobId, ids),
  );
  if (rowIds.length > 0) others.push(whereQueue(store, db(store.table).select("*").whereNull(SY.jobId).whereIn("id", rowIds), queue));
  return (others.length > 0 ? first!.unionAll(others) : first!) as Promise<JobRow[]>;
}

/**
 * PostgreSQL: each id one read of its own (a lateral read, `limit 1` so it is not flattened into a
 * join), the ids as one array parameter each (a page of 1,000 ids is not 1,000 parameters to bind).
 * The plan PostgreSQL keeps for the statement (prepared, postgres-prepared.ts) must not depend on how
 * many ids come or on what the statistics say of the queue: given `sy_job_id = any(...)` it weighed
 * ten ids a call against a queue it thought held five rows, and its kept plan read the whole queue
 * and filtered it at every call (a migration's page into a queue of 50,000 jobs: 1 s). Each read
 * here is one look-up in a unique index (sy_queue, sy_job_id) or the primary key.
 */
async function postgresRows(store: Store, db: Db, queue: string, ids: string[], rowIds: number[]): Promise<JobRow[]> {
  const table = quoted(store, store.table);
  const reads = queueSpellings(store, queue).map((spelling) => ({
    sql: `select t.* from unnest(?::text[]) as wanted(id)
      cross join lateral (select * from ${table} where ${spelling.sql} and ${SY.jobId} = wanted.id limit 1) t`,
    bindings: [ids as unknown as Knex.RawBinding, ...spelling.bindings],
  }));
  if (rowIds.length > 0) {
    const inQueue = queueCondition(store, queue);
    reads.push({
      sql: `select t.* from unnest(?::int4[]) as wanted(id)
      cross join lateral (select * from ${table} where id = wanted.id and ${SY.jobId} is null and ${inQueue.sql}) t`,
      bindings: [rowIds as unknown as Knex.RawBinding, ...inQueue.bindings],
    });
  }
  const result = await db.raw(
    reads.map((read) => read.sql).join("\n    union all "),
    reads.flatMap((read) => read.bindings),
  );
  return (result as { rows: JobRow[] }).rows;
}

/** The unfinished job that holds a unique key in a queue, or null. */
export async function findByUniqueKey(store: Store, db: Db, queue: string, key: string, latest = false): Promise<JobRow | null> {
  const query = latestRead(store, db(store.table).select("*"), latest).where(SY.uniqueSlot, key);
  whereQueue(store, query, queue);
  const rows = (await query.limit(1)) as JobRow[];
  return rows[0] ?? null;
}

/** The unfinished jobs of a queue that hold any of these unique keys, in one query. */
export async function findByUniqueKeys(store: Store, db: Db, queue: string, keys: string[]): Promise<JobRow[]> {
  const query = db(store.table).select("*").whereIn(SY.uniqueSlot, keys);
  whereQueue(store, query, queue);
  return (await query) as JobRow[];
}

/**
 * Inside a MySQL REPEATABLE READ transaction a plain SELECT reads the transaction's old snapshot and
 * misses a row another transaction just committed; a locking read sees it. Postgres (READ COMMITTED)
 * and SQLite (one writer at a time) see it anyway.
 */
function latestRead(store: Store, query: Knex.QueryBuilder, latest: boolean): Knex.QueryBuilder {
  return latest && store.dialect === "mysql" ? query.forShare() : query;
}

export async function rowById(store: Store, db: Db, rowId: number | string): Promise<JobRow> {
  const row = (await db(store.table).where("id", rowId).first()) as JobRow | undefined;
  if (!row) throw new Error(`workerqueue-sql: row ${rowId} vanished while being read back`);
  return row;
}
