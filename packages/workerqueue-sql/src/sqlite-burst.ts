import { insertStatement } from "./bulk-insert.js";
import type { JobRow } from "./columns.js";
import type { BurstOutcome, BurstWriter } from "./enqueue-burst.js";
import type { Store } from "./options.js";

/** What this file uses of a better-sqlite3 connection (@types/better-sqlite3 is not a dependency). */
interface SqliteStatement {
  get(...params: unknown[]): unknown;
}
interface SqliteConnection {
  prepare(sql: string): SqliteStatement;
  transaction<T>(work: () => T): { immediate(): T };
}

/**
 * SQLite through better-sqlite3: a burst (enqueue-burst.ts) in one transaction, by statements prepared
 * once per shape, so none pays knex's query building and the burst pays for one commit, one fsync of
 * the WAL. better-sqlite3 is synchronous: the transaction holds the event loop, as each statement did
 * already.
 */
export class SqliteBurstWriter implements BurstWriter {
  private readonly statements = new Map<string, SqliteStatement>();
  private statementsOf: SqliteConnection | undefined;

  constructor(private readonly store: Store) {}

  /** Whether the knex client is better-sqlite3 (another SQLite driver takes the ordinary path). */
  static fits(store: Store): boolean {
    return store.dialect === "sqlite" && /better-sqlite3/i.test(String(store.knex.client.config.client ?? ""));
  }

  /** Nothing of a burst that threw was written: the transaction was undone as a whole. */
  retryEach(): boolean {
    return true;
  }

  /** The burst in one transaction: a row, or the constraint that refused it (SQLite undoes only that statement). */
  async write(rows: Array<Record<string, unknown>>): Promise<BurstOutcome[]> {
    // The pool's only connection: no knex transaction is open on it meanwhile.
    const connection = (await this.store.knex.client.acquireConnection()) as SqliteConnection;
    try {
      const results: BurstOutcome[] = [];
      const writeAll = () => {
        for (const row of rows) {
          try {
            results.push({ row: this.insert(connection, row) });
          } catch (error) {
            // Any other error may have ended the transaction: the whole burst is undone and retried.
            if (!String((error as { code?: unknown }).code ?? "").startsWith("SQLITE_CONSTRAINT")) throw error;
            results.push({ error });
          }
        }
      };
      // A lone job is its own transaction. BEGIN IMMEDIATE takes the write lock first (waiting out
      // busy_timeout), so no statement of a burst meets a busy file half-way.
      if (rows.length === 1) writeAll();
      else connection.transaction(writeAll).immediate();
      return results;
    } finally {
      // Never throws into the caller: the burst is written by then, and must not be written again.
      await Promise.resolve(this.store.knex.client.releaseConnection(connection)).catch(() => undefined);
    }
  }

  /** One row by a statement prepared once per set of columns. */
  private insert(connection: SqliteConnection, row: Record<string, unknown>): JobRow {
    if (this.statementsOf !== connection) {
      // A new connection (the pool replaced it): statements belong to the one that prepared them.
      this.statements.clear();
      this.statementsOf = connection;
    }
    const { sql, bindings } = insertStatement(this.store, [row], "returning *");
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = connection.prepare(sql);
      this.statements.set(sql, statement);
    }
    // As knex passes them to better-sqlite3: booleans as 0/1.
    return statement.get(...bindings.map((value) => (typeof value === "boolean" ? Number(value) : value))) as JobRow;
  }
}
