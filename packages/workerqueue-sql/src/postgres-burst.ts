import { isConnectionError } from "@switchyard/core";
import { insertReturning } from "./bulk-insert.js";
import type { BurstItem, BurstOutcome, BurstWriter } from "./enqueue-burst.js";
import type { Store } from "./options.js";

/**
 * PostgreSQL: a burst (enqueue-burst.ts) as one multi-row INSERT ... RETURNING, one statement and one
 * commit (and one NOTIFY of the table's statement trigger) for every enqueue of the turn, where each
 * would otherwise pay its own. One statement is all or nothing: when it fails before the server
 * answered (a refused value, a lock conflict) nothing was written and each job takes the ordinary
 * path, which refuses only the job at fault; a connection lost meanwhile may have committed it, so
 * its jobs get that error rather than a second write.
 */
export class PostgresBurstWriter implements BurstWriter {
  /** Jobs with an id go in groups of their own (postgres-id-enqueue.ts). */
  readonly takesIds = false;

  constructor(private readonly store: Store) {}

  static fits(store: Store): boolean {
    return store.dialect === "postgres" && store.layout.insertReturning;
  }

  retryEach(error: unknown): boolean {
    return !isConnectionError(error);
  }

  async write(items: BurstItem[]): Promise<BurstOutcome[]> {
    const rows = items.map((item) => item.row);
    return (await insertReturning(this.store, this.store.knex, rows)).map((row) => ({ row, created: true }));
  }
}
