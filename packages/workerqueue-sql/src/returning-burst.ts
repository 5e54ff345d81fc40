import { isConnectionError } from "@switchyard/core";
import { insertReturning } from "./bulk-insert.js";
import type { Condition } from "./claim.js";
import type { JobRow } from "./columns.js";
import type { BurstItem, BurstOutcome, BurstWriter } from "./enqueue-burst.js";
import { readAll } from "./mysql-script.js";
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
  /**
   * MariaDB: a job with an id goes in the burst, looked up first (all the burst's look-ups in one
   * script); PostgreSQL groups those its own way (postgres-id-enqueue.ts).
   */
  readonly takesIds: boolean;

  constructor(private readonly store: Store) {
    this.takesIds = store.dialect === "mysql";
  }

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

  /**
   * The rows whose id no row holds (the first of the burst to name an id), in one insert; the others
   * answer the row that holds their id. Another process that writes one of those ids between the
   * look-up and the insert makes the unique index (sy_queue, sy_job_id) refuse the insert whole:
   * nothing of the burst was written, and each job takes the ordinary path.
   */
  async write(items: BurstItem[]): Promise<BurstOutcome[]> {
    // An item's id look-up spelled as text: items of one queue and id have the same.
    const keys = items.map((item) => item.find && JSON.stringify(item.find));
    const held = await this.heldRows(items, keys);
    const writer = new Map<string, number>();
    const writing = items.flatMap((_, i) => {
      const key = keys[i];
      if (key === undefined) return [i];
      if (held.has(key) || writer.has(key)) return [];
      writer.set(key, i);
      return [i];
    });
    const stored = await insertReturning(
      this.store,
      this.store.knex,
      writing.map((i) => (items[i] as BurstItem).row),
    );
    const written = new Map(writing.map((i, k) => [i, stored[k] as JobRow]));
    return keys.map((key, i) => {
      const row = written.get(i);
      if (row) return { row, created: true };
      return { row: (held.get(key as string) ?? written.get(writer.get(key as string) as number)) as JobRow, created: false };
    });
  }

  /** The rows already holding the burst's ids, by their look-ups (`find`, one per key): one script of one read each. */
  private async heldRows(items: BurstItem[], keys: Array<string | undefined>): Promise<Map<string, JobRow>> {
    const finds = new Map<string, Condition>();
    items.forEach((item, i) => {
      const key = keys[i];
      if (key !== undefined && item.find) finds.set(key, item.find);
    });
    const held = new Map<string, JobRow>();
    if (finds.size === 0) return held;
    const reads = [...finds.values()];
    const results = await readAll(this.store, reads);
    [...finds.keys()].forEach((key, i) => {
      const row = (results[i] as JobRow[])[0];
      if (row) held.set(key, row);
    });
    return held;
  }
}
