import type { Knex } from "knex";
import { MAX_ROW_ID } from "./columns.js";
import type { Store } from "./options.js";

/**
 * After a numeric id was written to `sy_job_id` (caller-chosen or imported), moves the table's id
 * counter past it, so that no later row gets that number as its own id in the same queue. Best
 * effort on purpose: the counter only ever moves up.
 */
export async function advanceIdCounter(store: Store, db: Knex | Knex.Transaction, ids: string[]): Promise<void> {
  const numeric = ids.filter((id) => /^[1-9][0-9]{0,9}$/.test(id)).map(Number);
  const highest = Math.max(0, ...numeric.filter((n) => n <= MAX_ROW_ID));
  if (highest === 0) return;
  const { table } = store;
  if (store.dialect === "postgres") {
    await db.raw(
      `select setval(seq, ?) from (select pg_get_serial_sequence(?, 'id') as seq) s
       where s.seq is not null and ? > coalesce(pg_sequence_last_value(s.seq::regclass), 0)`,
      [highest, table, highest],
    );
  } else if (store.dialect === "mysql") {
    const next = await mysqlNextId(db, table);
    // DDL: commits implicitly, so this runs outside any transaction (callers call it after commit).
    if (next <= highest) await db.raw(`alter table ?? auto_increment = ${highest + 1}`, [table]);
  } else {
    // Tables created without AUTOINCREMENT have no counter row; then SQLite uses max(id)+1.
    await db.raw("update sqlite_sequence set seq = ? where name = ? and seq < ?", [highest, table, highest]);
  }
}

/** The table's next AUTO_INCREMENT value, read fresh (MySQL 8 caches it in information_schema). */
async function mysqlNextId(db: Knex | Knex.Transaction, table: string): Promise<number> {
  const read = async (connection: Knex.Transaction) => {
    // MySQL 8 only; MariaDB has no such variable and never caches the value.
    await connection.raw("set session information_schema_stats_expiry = 0").catch(() => undefined);
    const [rows] = await connection.raw(
      "select auto_increment as next from information_schema.tables where table_schema = database() and table_name = ?",
      [table],
    );
    return Number((rows as Array<{ next: unknown }>)[0]?.next ?? 0);
  };
  // One connection for the session setting and the read.
  return db.isTransaction ? read(db as Knex.Transaction) : (db as Knex).transaction(read);
}
