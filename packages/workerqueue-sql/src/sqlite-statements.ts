import { setNewest } from "@switchyard/core";
import type { Store } from "./options.js";

/** What this package uses of a better-sqlite3 connection (@types/better-sqlite3 is not a dependency). */
export interface SqliteStatement {
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}
export interface SqliteConnection {
  prepare(sql: string): SqliteStatement;
  transaction<T>(work: () => T): { immediate(): T };
}

/** Whether the knex client is better-sqlite3 (another SQLite driver takes knex's ordinary path). */
export function isBetterSqlite(store: Store): boolean {
  return store.dialect === "sqlite" && /better-sqlite3/i.test(String(store.knex.client.config.client ?? ""));
}

/** Statements kept, as the connection's own cache keeps (options.ts). */
const MOST_PREPARED = 200;

/**
 * Statements run on the pool's one better-sqlite3 connection directly, each prepared once per text
 * (a connection knexFromUrl made keeps them already; one a caller's knex made does not), with its
 * bindings as knex passes them: booleans as 0/1, dates as milliseconds.
 */
export class SqliteStatements {
  private readonly prepared = new Map<string, SqliteStatement>();
  private preparedOn: SqliteConnection | undefined;

  constructor(private readonly store: Store) {}

  /**
   * Runs `work` holding the connection (no knex query or transaction runs on it meanwhile: the pool
   * has one), and gives it back whatever happens.
   */
  async withConnection<T>(work: (connection: SqliteConnection) => T): Promise<T> {
    const connection = (await this.store.knex.client.acquireConnection()) as SqliteConnection;
    try {
      return work(connection);
    } finally {
      // Never throws into the caller: what `work` wrote is written, and must not be written again.
      await Promise.resolve(this.store.knex.client.releaseConnection(connection)).catch(() => undefined);
    }
  }

  /** The statement of `sql` on this connection. */
  statement(connection: SqliteConnection, sql: string): SqliteStatement {
    if (this.preparedOn !== connection) {
      // A new connection (the pool replaced it): statements belong to the one that prepared them.
      this.prepared.clear();
      this.preparedOn = connection;
    }
    const statement = this.prepared.get(sql) ?? connection.prepare(sql);
    // The least recently used goes first: a claim's text grows with its count of rows.
    setNewest(this.prepared, sql, statement, MOST_PREPARED);
    return statement;
  }

  /** The rows a statement with RETURNING (or a SELECT) answers. */
  rows<T>(connection: SqliteConnection, sql: string, bindings: readonly unknown[]): T[] {
    return this.statement(connection, sql).all(...bindings.map(asSqliteValue)) as T[];
  }
}

const asSqliteValue = (value: unknown) => (typeof value === "boolean" ? Number(value) : value instanceof Date ? value.valueOf() : value);
