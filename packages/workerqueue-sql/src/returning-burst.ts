import { isConnectionError } from "@switchyard/core";
import { insertReturning, rowsOf } from "./bulk-insert.js";
import type { JobRow } from "./columns.js";
import type { BurstItem, BurstOutcome, BurstWriter } from "./enqueue-burst.js";
import { sendScript } from "./mysql-script.js";
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
    const held = await this.heldRows(items);
    const firstOf = new Map<string, number>();
    const writing: number[] = [];
    items.forEach((item, i) => {
      const key = item.find && JSON.stringify(item.find);
      if (key && (held.has(key) || firstOf.has(key))) return;
      if (key) firstOf.set(key, i);
      writing.push(i);
    });
    const stored = await insertReturning(
      this.store,
      this.store.knex,
      writing.map((i) => (items[i] as BurstItem).row),
    );
    const written = new Map(writing.map((i, k) => [i, stored[k] as JobRow]));
    return items.map((item, i) => {
      const row = written.get(i);
      if (row) return { row, created: true };
      const key = JSON.stringify(item.find);
      return { row: held.get(key) ?? (written.get(firstOf.get(key) ?? -1) as JobRow), created: false };
    });
  }

  /** The rows already holding the burst's ids, by their look-up (`find`): one script of one read each. */
  private async heldRows(items: BurstItem[]): Promise<Map<string, JobRow>> {
    const finds = [...new Map(items.flatMap((item) => (item.find ? [[JSON.stringify(item.find), item.find] as const] : []))).entries()];
    const held = new Map<string, JobRow>();
    if (finds.length === 0) return held;
    const results =
      (await sendScript(
        this.store,
        finds.map(([, find]) => ({ sql: find.sql, bindings: find.bindings })),
      )) ??
      (await Promise.all(
        finds.map(([, find]) => this.store.knex.raw(find.sql, find.bindings).then((result) => rowsOf(this.store, result))),
      ));
    finds.forEach(([key], i) => {
      const row = (results[i] as JobRow[])[0];
      if (row) held.set(key, row);
    });
    return held;
  }
}
