import { type EnqueueResult, type NormalizedEnqueueInput, runAtOf } from "@switchyard/core";
import { insertStatement } from "./bulk-insert.js";
import type { JobRow } from "./columns.js";
import { typedError } from "./db-errors.js";
import type { Store } from "./options.js";
import { enqueueRow, rowToJob } from "./row.js";

/** What this file uses of a better-sqlite3 connection (@types/better-sqlite3 is not a dependency). */
interface SqliteStatement {
  get(...params: unknown[]): unknown;
}
interface SqliteConnection {
  prepare(sql: string): SqliteStatement;
  transaction<T>(work: () => T): { immediate(): T };
}

interface Waiting {
  queue: string;
  input: NormalizedEnqueueInput;
  resolve: (result: EnqueueResult) => void;
  reject: (error: unknown) => void;
}

/**
 * SQLite through better-sqlite3: the enqueues (without id or unique key) made in the same turn of the
 * event loop are written in one transaction, by statements prepared once per shape, so a burst of
 * them (a gateway under load) pays for one commit, one fsync of the WAL, instead of one each, and
 * none pays knex's query building. Nothing is answered before the commit, so an acknowledged job is
 * stored as before. better-sqlite3 is synchronous: the transaction holds the event loop, as each
 * statement did already.
 */
export class SqliteEnqueueBurst {
  private waiting: Waiting[] = [];
  private readonly statements = new Map<string, SqliteStatement>();
  private statementsOf: SqliteConnection | undefined;

  /**
   * @param fallback the ordinary path (knex, retries, typed errors), which each job of a burst takes
   *   when the burst's transaction as a whole could not be written (a busy file, a full disk...).
   */
  constructor(
    private readonly store: Store,
    private readonly fallback: (queue: string, input: NormalizedEnqueueInput) => Promise<EnqueueResult>,
  ) {}

  /** Whether the knex client is better-sqlite3 (another SQLite driver takes the ordinary path). */
  static fits(store: Store): boolean {
    return store.dialect === "sqlite" && /better-sqlite3/i.test(String(store.knex.client.config.client ?? ""));
  }

  enqueue(queue: string, input: NormalizedEnqueueInput): Promise<EnqueueResult> {
    return new Promise((resolve, reject) => {
      if (this.waiting.length === 0) setImmediate(() => void this.flush());
      this.waiting.push({ queue, input, resolve, reject });
    });
  }

  private async flush(): Promise<void> {
    const now = Date.now();
    // A job whose row cannot be made (a value out of range) is refused alone, before anything is written.
    const burst: Array<Waiting & { row: Record<string, unknown> }> = [];
    for (const item of this.waiting) {
      try {
        burst.push({ ...item, row: enqueueRow(this.store, item.queue, item.input, runAtOf(item.input, now), now) });
      } catch (error) {
        item.reject(error);
      }
    }
    this.waiting = [];
    if (burst.length === 0) return;
    let results: Array<{ row: JobRow } | { error: unknown }>;
    try {
      results = await this.write(burst.map((item) => item.row));
    } catch {
      // Nothing of the burst was written: each job goes the ordinary way, with its retries and errors.
      for (const item of burst) this.fallback(item.queue, item.input).then(item.resolve, item.reject);
      return;
    }
    burst.forEach((item, i) => {
      const result = results[i] as { row: JobRow } | { error: unknown };
      if ("error" in result) item.reject(typedError("enqueue", result.error));
      else item.resolve({ job: rowToJob(this.store, result.row, now), created: true });
    });
  }

  /** The burst in one transaction: a row, or the constraint that refused it (SQLite undoes only that statement). */
  private async write(rows: Array<Record<string, unknown>>): Promise<Array<{ row: JobRow } | { error: unknown }>> {
    // The pool's only connection: no knex transaction is open on it meanwhile.
    const connection = (await this.store.knex.client.acquireConnection()) as SqliteConnection;
    try {
      const results: Array<{ row: JobRow } | { error: unknown }> = [];
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
