import type { Knex } from "knex";
import { rowsOf } from "./bulk-insert.js";
import type { Store } from "./options.js";

/** One statement of a script and its bindings (values always go as bindings, escaped by the driver). */
export interface Statement {
  sql: string;
  bindings: Knex.RawBinding[];
}

/** What a script needs of the server beyond several statements per text. */
export type ScriptNeeds = "any" | "mariadb";

interface Mysql2Connection {
  config?: { multipleStatements?: boolean };
  destroy?(): void;
}

/** Per knex instance: whether the server is MariaDB (asked once, on the first script that needs to know). */
const mariadbServers = new WeakMap<Knex, Promise<boolean>>();

/**
 * MySQL/MariaDB: sends several statements as ONE query text on one pooled connection, so they cost
 * one round trip, and answers each statement's result in order. The text is one transaction:
 * `SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION; ...; COMMIT` (READ COMMITTED:
 * no gap locks, so concurrent claims and updates do not deadlock on each other's index entries). A
 * failure (the server stops at the failing statement) is rolled back on the same connection before
 * it goes back to the pool, so no transaction or lock outlives the call.
 *
 * Null, with nothing sent, when the connection was not opened with mysql2's `multipleStatements`
 * (a knex instance the user made without it: the caller then takes its statement-by-statement
 * path), or when `needs` is "mariadb" and the server is MySQL.
 */
export async function sendScript(store: Store, statements: Statement[], needs: ScriptNeeds = "any"): Promise<unknown[] | null> {
  const { knex } = store;
  const connection = (await knex.client.acquireConnection()) as Mysql2Connection;
  try {
    if (connection.config?.multipleStatements !== true) return null;
    if (needs === "mariadb" && !(await isMariadb(knex, connection))) return null;
    const all = [
      { sql: "set transaction isolation level read committed", bindings: [] },
      { sql: "start transaction", bindings: [] },
      ...statements,
      { sql: "commit", bindings: [] },
    ];
    const text = all.map((statement) => statement.sql).join(";\n");
    const bindings = all.flatMap((statement) => statement.bindings);
    try {
      const [results] = (await knex.raw(text, bindings).connection(connection)) as [unknown[]];
      return results.slice(2, -1);
    } catch (error) {
      await rollback(knex, connection);
      throw error;
    }
  } finally {
    await knex.client.releaseConnection(connection);
  }
}

/**
 * Reads: each statement's rows, all in one script (sendScript), or each statement apart (and at once)
 * on a connection that cannot take a script.
 */
export async function readAll(store: Store, reads: Statement[]): Promise<unknown[][]> {
  const results = await sendScript(store, reads);
  if (results) return results as unknown[][];
  return Promise.all(reads.map(async (read) => rowsOf(store, await store.knex.raw(read.sql, read.bindings))));
}

/**
 * Ends the transaction a failed script left open. A connection that cannot even roll back is
 * closed, so that the pool drops it rather than lend out a transaction still open.
 */
async function rollback(knex: Knex, connection: Mysql2Connection): Promise<void> {
  try {
    await knex.raw("rollback").connection(connection);
  } catch {
    connection.destroy?.();
  }
}

/** Whether a MySQL-family server is MariaDB; asked once per knex instance. */
function isMariadb(knex: Knex, connection: unknown): Promise<boolean> {
  let known = mariadbServers.get(knex);
  if (!known) {
    known = knex
      .raw("select version() as version")
      .connection(connection)
      .then((result: [Array<{ version?: unknown }>]) => /mariadb/i.test(String(result[0][0]?.version ?? "")));
    // A failed look-up is asked again next time.
    known.catch(() => mariadbServers.delete(knex));
    mariadbServers.set(knex, known);
  }
  return known;
}
