import { isConnectionError } from "@switchyard/core";
import { insertReturning } from "./bulk-insert.js";
import type { BurstItem, BurstOutcome, BurstWriter } from "./enqueue-burst.js";
import type { Store } from "./options.js";

/**
 * PostgreSQL and MariaDB 10.5+: a burst (enqueue-burst.ts) as one multi-row INSERT ... RETURNING, one
 * statement and one commit (on PostgreSQL one NOTIFY of the table's statement trigger too) for every
 * enqueue of the turn, where each would otherwise pay its own. One statement is all or nothing (on
 * MariaDB as InnoDB undoes a failed statement whole; the claims need InnoDB's row locks too): when
 * it fails before the server answered (a refused value, a lock conflict) nothing was written and
 * each job takes the ordinary path, which refuses only the job at fault; a connection lost meanwhile
 * may have committed it, so its jobs get that error rather than a second write.
 */
export class ReturningBurstWriter implements BurstWriter {
  /** Jobs with an id go in groups of their own on PostgreSQL (postgres-id-enqueue.ts), alone on MariaDB. */
  readonly takesIds = false;

  constructor(private readonly store: Store) {}

  /** The SQL servers; MySQL, which has no INSERT ... RETURNING, is told apart by canWrite(). */
  static fits(store: Store): boolean {
    return store.dialect === "postgres" || store.dialect === "mysql";
  }

  /** Known once ready() has read the server's version (MariaDB 10.5 added RETURNING to INSERT). */
  canWrite(): boolean {
    return this.store.layout.insertReturning;
  }

  retryEach(error: unknown): boolean {
    return !isConnectionError(error);
  }

  async write(items: BurstItem[]): Promise<BurstOutcome[]> {
    const rows = items.map((item) => item.row);
    return (await insertReturning(this.store, this.store.knex, rows)).map((row) => ({ row, created: true }));
  }
}
