import { insertStatement } from "./bulk-insert.js";
import type { JobRow } from "./columns.js";
import type { BurstItem, BurstOutcome, BurstWriter } from "./enqueue-burst.js";
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
  /** A job with an id is looked up, then written, in the burst's transaction: nothing else writes between. */
  readonly takesIds = true;

  constructor(private readonly store: Store) {
    this.statements = new SqliteStatements(store);
  }

  /** Whether the knex client is better-sqlite3 (another SQLite driver takes the ordinary path). */
  static fits(store: Store): boolean {
    return isBetterSqlite(store);
  }

  canWrite(): boolean {
    return true;
  }

  /** Nothing of a burst that threw was written: the transaction was undone as a whole. */
  retryEach(): boolean {
    return true;
  }

  /**
   * The burst in one transaction: a row (or, for an id some row holds already, including one written
   * earlier in the burst, that row), or the constraint that refused it (SQLite undoes only that statement).
   */
  write(items: BurstItem[]): Promise<BurstOutcome[]> {
    return this.statements.withConnection((connection) => {
      const results: BurstOutcome[] = [];
      const writeAll = () => {
        for (const { row, find } of items) {
          const held = find && this.statements.rows<JobRow>(connection, find.sql, find.bindings)[0];
          if (held) {
            results.push({ row: held, created: false });
            continue;
          }
          try {
            const { sql, bindings } = insertStatement(this.store, [row], "returning *");
            results.push({ row: this.statements.rows<JobRow>(connection, sql, bindings)[0] as JobRow, created: true });
          } catch (error) {
            // Any other error may have ended the transaction: the whole burst is undone and retried.
            if (!String((error as { code?: unknown }).code ?? "").startsWith("SQLITE_CONSTRAINT")) throw error;
            results.push({ error });
          }
        }
      };
      // A lone job without an id is its own transaction. BEGIN IMMEDIATE takes the write lock first
      // (waiting out busy_timeout), so no statement of a burst meets a busy file half-way, and no
      // other process writes an id between its look-up and its insert.
      if (items.length === 1 && !items[0]?.find) writeAll();
      else connection.transaction(writeAll).immediate();
      return results;
    });
  }
}
