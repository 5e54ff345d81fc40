import { insertStatement } from "./bulk-insert.js";
import type { JobRow } from "./columns.js";
import type { BurstOutcome, BurstWriter } from "./enqueue-burst.js";
import type { Store } from "./options.js";
import { SqliteStatements, isBetterSqlite } from "./sqlite-statements.js";

/**
 * SQLite through better-sqlite3: a burst (enqueue-burst.ts) in one transaction, by statements prepared
 * once per shape, so none pays knex's query building and the burst pays for one commit, one fsync of
 * the WAL. better-sqlite3 is synchronous: the transaction holds the event loop, as each statement did
 * already.
 */
export class SqliteBurstWriter implements BurstWriter {
  private readonly statements: SqliteStatements;

  constructor(private readonly store: Store) {
    this.statements = new SqliteStatements(store);
  }

  /** Whether the knex client is better-sqlite3 (another SQLite driver takes the ordinary path). */
  static fits(store: Store): boolean {
    return isBetterSqlite(store);
  }

  /** Nothing of a burst that threw was written: the transaction was undone as a whole. */
  retryEach(): boolean {
    return true;
  }

  /** The burst in one transaction: a row, or the constraint that refused it (SQLite undoes only that statement). */
  write(rows: Array<Record<string, unknown>>): Promise<BurstOutcome[]> {
    return this.statements.withConnection((connection) => {
      const results: BurstOutcome[] = [];
      const writeAll = () => {
        for (const row of rows) {
          try {
            const { sql, bindings } = insertStatement(this.store, [row], "returning *");
            results.push({ row: this.statements.rows<JobRow>(connection, sql, bindings)[0] as JobRow });
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
    });
  }
}
