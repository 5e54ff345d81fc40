import type { Knex } from "knex";
import type { JobRow } from "./columns.js";
import type { Store } from "./options.js";

/**
 * Multi-row inserts written as SQL text rather than with knex's builder, which compiles a page of
 * 1,000 rows of ~30 columns slowly and writes SQLite's as a compound SELECT capped at 500 terms.
 * PostgreSQL gets one array per column (`insert ... select * from unnest($1::int4[], ...)`): 30
 * parameters whatever the number of rows, where a VALUES list needs 30 per row and its parse time.
 */

export type Db = Knex | Knex.Transaction;

/** The table or a column, quoted for the dialect (the table name is checked against IDENTIFIER in options.ts). */
export function quoted(store: Store, name: string): string {
  return store.dialect === "mysql" ? `\`${name}\`` : `"${name}"`;
}

/** SQLite allows 32,766 bound parameters per statement; MySQL's binary protocol 65,535. */
const MAX_BINDINGS = 30_000;
/** PostgreSQL takes any number of rows in its arrays; a bound keeps one statement's memory modest. */
const MAX_ARRAY_ROWS = 5_000;

/** The columns of these rows, in first-seen order (rows may lack the optional legacy ones). */
function columnsOf(rows: Array<Record<string, unknown>>): string[] {
  const columns = new Set<string>();
  for (const row of rows) for (const column of Object.keys(row)) columns.add(column);
  return [...columns];
}

/** Rows per statement for this dialect and these rows' columns. */
function chunkSize(store: Store, rows: Array<Record<string, unknown>>): number {
  const columns = columnsOf(rows);
  if (store.dialect === "postgres" && columns.every((column) => store.layout.columnTypes.has(column))) return MAX_ARRAY_ROWS;
  return Math.max(1, Math.floor(MAX_BINDINGS / Math.max(1, columns.length)));
}

/**
 * The INSERT of these rows and its bindings; `tail` goes after it (`on conflict do nothing`,
 * `returning *`). A column a row lacks is written NULL, as its default is for every optional column.
 */
export function insertStatement(
  store: Store,
  rows: Array<Record<string, unknown>>,
  tail: string,
): { sql: string; bindings: Knex.RawBinding[] } {
  const columns = columnsOf(rows);
  const names = columns.map((column) => quoted(store, column)).join(", ");
  const into = `insert into ${quoted(store, store.table)} (${names})`;
  // One row (an enqueue) is quicker as VALUES: the arrays pay off from a handful of rows on. Each
  // array is cast to its column's type, as ready() read it (a column it did not see: VALUES, chunked).
  const types = columns.map((column) => store.layout.columnTypes.get(column));
  if (store.dialect === "postgres" && rows.length > 1 && types.every((type) => type !== undefined)) {
    const arrays = columns.map((column) => rows.map((row) => row[column] ?? null) as Knex.RawBinding);
    const casts = types.map((type) => `?::${type}[]`).join(", ");
    return { sql: `${into} select * from unnest(${casts}) ${tail}`, bindings: arrays };
  }
  const tuple = `(${columns.map(() => "?").join(", ")})`;
  const bindings: Knex.RawBinding[] = [];
  for (const row of rows) for (const column of columns) bindings.push((row[column] ?? null) as Knex.RawBinding);
  return { sql: `${into} values ${rows.map(() => tuple).join(", ")} ${tail}`, bindings };
}

/** The rows a raw statement answered, whatever the driver's shape. */
export function rowsOf(store: Store, result: unknown): JobRow[] {
  if (store.dialect === "postgres") return (result as { rows: JobRow[] }).rows;
  if (store.dialect === "mysql") return (result as [JobRow[]])[0];
  return result as JobRow[];
}

/**
 * Inserts rows, one statement per chunk, and answers the stored rows in the order given. Ids are
 * drawn in the order the rows are written, so sorting what RETURNING gave (in no promised order) by
 * id restores it. Needs `layout.insertReturning`.
 */
export async function insertReturning(store: Store, db: Db, rows: Array<Record<string, unknown>>, returning = "*"): Promise<JobRow[]> {
  const stored: JobRow[] = [];
  const size = chunkSize(store, rows);
  for (let start = 0; start < rows.length; start += size) {
    const { sql, bindings } = insertStatement(store, rows.slice(start, start + size), `returning ${returning}`);
    const chunk = rowsOf(store, await db.raw(sql, bindings));
    if (chunk.length !== Math.min(size, rows.length - start))
      throw new Error("workerqueue-sql: a bulk insert returned fewer rows than it wrote");
    stored.push(...chunk.sort((a, b) => Number(a.id) - Number(b.id)));
  }
  return stored;
}

/**
 * Inserts rows, skipping those a unique index refuses (`on conflict do nothing`, PostgreSQL and
 * SQLite); answers the rows written, as stored (the `returning` columns of them).
 */
export async function insertSkippingConflicts(
  store: Store,
  db: Db,
  rows: Array<Record<string, unknown>>,
  returning = "*",
): Promise<JobRow[]> {
  const written: JobRow[] = [];
  const size = chunkSize(store, rows);
  for (let start = 0; start < rows.length; start += size) {
    const { sql, bindings } = insertStatement(store, rows.slice(start, start + size), `on conflict do nothing returning ${returning}`);
    written.push(...rowsOf(store, await db.raw(sql, bindings)));
  }
  return written;
}

/** Inserts rows without reading them back, one statement per chunk (MySQL's import, in a savepoint per page). */
export async function insertPlain(store: Store, db: Db, rows: Array<Record<string, unknown>>): Promise<void> {
  const size = chunkSize(store, rows);
  for (let start = 0; start < rows.length; start += size) {
    const { sql, bindings } = insertStatement(store, rows.slice(start, start + size), "");
    await db.raw(sql, bindings);
  }
}
