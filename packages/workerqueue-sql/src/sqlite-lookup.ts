import { groupCommit } from "@switchyard/core";
import { withRetry } from "./db-errors.js";
import { holdingQueues, queuesHoldingArgs, queuesHoldingStatement } from "./lookup.js";
import type { Store } from "./options.js";
import { type SqliteConnection, SqliteStatements, isBetterSqlite } from "./sqlite-statements.js";

/**
 * SQLite's JobLookup (`queuesHolding`) through better-sqlite3: the statement knex ran before costs
 * SQLite about 10 µs (one seek per queue name and per name in the (queue, job id) index), and knex's
 * query building and plumbing around it five times that; a qless door asks on every put. Here it is
 * prepared once and run on the connection directly, and the look-ups that arrive while one holds the
 * connection go together in one hold of it, each answered with the queues holding its own id, in
 * name order, as a look-up of its own would answer.
 */
export class SqliteQueueLookup {
  private readonly statements: SqliteStatements;
  private readonly send: (key: string, id: string) => Promise<string[]>;
  /** The statement's text for an id, and for an id that also spells a row id. */
  private readonly byId: string;
  private readonly byIdOrRowId: string;

  constructor(private readonly store: Store) {
    this.statements = new SqliteStatements(store);
    this.byId = queuesHoldingStatement(store, false);
    this.byIdOrRowId = queuesHoldingStatement(store, true);
    this.send = groupCommit((_key, ids: string[]) =>
      withRetry("queuesHolding", () => this.statements.withConnection((connection) => ids.map((id) => this.holding(connection, id)))),
    );
  }

  static fits(store: Store): boolean {
    return isBetterSqlite(store);
  }

  queuesHolding(id: string): Promise<string[]> {
    return this.send("", id);
  }

  private holding(connection: SqliteConnection, id: string): string[] {
    const { byRowId, bindings } = queuesHoldingArgs(id);
    const sql = byRowId ? this.byIdOrRowId : this.byId;
    return holdingQueues(this.store, this.statements.rows<{ name: string | null }>(connection, sql, bindings));
  }
}
