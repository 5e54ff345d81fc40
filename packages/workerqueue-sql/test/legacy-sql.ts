import type { Knex } from "knex";
import type { Dialect } from "../src/index.js";
import { nowSql } from "./dialects.js";

/**
 * The SQL the legacy programs send, written out as they send it (spec §2.1, §8): a producer's raw
 * INSERT and the C++ worker's claim, read-back and finish. On MySQL/MariaDB these are the exact
 * statements; SQLite and PostgreSQL have no `UPDATE ... ORDER BY ... LIMIT`, so the claim picks its
 * rows with the same ORDER BY/LIMIT in a subquery and keeps the legacy WHERE on the outer UPDATE.
 */
export class LegacySql {
  constructor(
    private readonly db: Knex,
    private readonly dialect: Dialect,
    private readonly table: string,
  ) {}

  /** tests/message.rb of workq: INSERT ... VALUES ('magick','pending',0,'','<json>',NOW). */
  async insertWorkq(name: string, json: string): Promise<void> {
    await this.db.raw(
      `INSERT INTO ${this.table} (name,status,attempts,locked_queue_id,data,created_at) VALUES ('${name}','pending',0,'','${json}',${nowSql(this.dialect)})`,
    );
  }

  /** rjqueue's `schedule`: an ActiveRecord create with YAML data and the taskable association. */
  async insertRjqueue(name: string, yaml: string, taskableId: number, taskableType: string): Promise<void> {
    await this.db.raw(
      `INSERT INTO ${this.table} (name,data,taskable_id,taskable_type,status,created_at,updated_at) VALUES (?,?,?,?,'pending',${nowSql(this.dialect)},${nowSql(this.dialect)})`,
      [name, yaml, taskableId, taskableType],
    );
  }

  /** worker.cc find_jobs step 2: claim up to `workload` rows under a lock id. */
  async claim(lock: string, workload: number): Promise<void> {
    const t = this.table;
    if (this.dialect === "mysql") {
      await this.db.raw(
        `UPDATE ${t} SET locked_queue_id='${lock}', status='loading' WHERE status='pending' AND locked_queue_id='' ORDER BY id LIMIT ${workload}`,
      );
    } else {
      await this.db.raw(
        `UPDATE ${t} SET locked_queue_id='${lock}', status='loading' WHERE status='pending' AND locked_queue_id='' AND id IN (SELECT id FROM ${t} WHERE status='pending' AND locked_queue_id='' ORDER BY id LIMIT ${workload})`,
      );
    }
  }

  /** worker.cc find_jobs step 3: read back the claimed rows. */
  async claimed(lock: string, workload: number): Promise<Array<{ id: number; name: string; data: string }>> {
    const result = await this.db.raw(
      `SELECT id, name, data FROM ${this.table} WHERE status='loading' AND locked_queue_id='${lock}' ORDER BY id LIMIT ${workload}`,
    );
    return rowsOf(this.dialect, result);
  }

  /** Step 4 (module found) and 5a/5b (after execute). */
  async startProcessing(id: number): Promise<void> {
    await this.db.raw(`UPDATE ${this.table} SET status='processing' WHERE id=${id}`);
  }

  async finish(id: number, status: "complete" | "error"): Promise<void> {
    const orderBy = this.dialect === "mysql" ? " ORDER BY id" : "";
    await this.db.raw(`UPDATE ${this.table} SET locked_queue_id='', status='${status}' WHERE id=${id}${orderBy}`);
  }
}

/**
 * rjqueue's worker (lib/jobs/worker.rb, runnable.rb) as the SQL ActiveRecord sends for it: select
 * pending unlocked rows, lock each, mark it processing, then save the outcome with `locked` false.
 */
export class RjqueueSql {
  constructor(
    private readonly db: Knex,
    private readonly dialect: Dialect,
    private readonly table: string,
  ) {}

  private bool(value: boolean): string {
    if (this.dialect === "postgres") return value ? "true" : "false";
    return value ? "1" : "0";
  }

  /** `find(:all, conditions: "status='pending' and locked=0", limit: count)`, then `locked=true` and save. */
  async take(count: number): Promise<number[]> {
    return this.db.transaction(async (trx) => {
      const rows = rowsOf<{ id: number }>(
        this.dialect,
        await trx.raw(`SELECT * FROM ${this.table} WHERE (status='pending' and locked=${this.bool(false)}) LIMIT ${count}`),
      );
      for (const row of rows) await trx.raw(`UPDATE ${this.table} SET locked = ${this.bool(true)} WHERE id = ${row.id}`);
      return rows.map((row) => Number(row.id));
    });
  }

  async startProcessing(id: number): Promise<void> {
    await this.db.raw(`UPDATE ${this.table} SET status = 'processing' WHERE id = ${id}`);
  }

  /** `real_execute` and the ensure block: outcome, duration in seconds, unlocked. */
  async finish(id: number, status: "complete" | "error", duration: number): Promise<void> {
    await this.db.raw(
      `UPDATE ${this.table} SET status = '${status}', duration = ${duration}, locked = ${this.bool(false)} WHERE id = ${id}`,
    );
  }
}

/** The rows of a raw result, whatever the driver's shape. */
export function rowsOf<T>(dialect: Dialect, result: unknown): T[] {
  if (dialect === "postgres") return (result as { rows: T[] }).rows;
  if (dialect === "mysql") return (result as [T[]])[0];
  return result as T[];
}

/** A lock id in worker.cc's `pid:thread_ptr:tv_sec:tv_usec` form. */
export function legacyLockId(): string {
  const now = Date.now();
  return `${process.pid}:${Math.floor(Math.random() * 2 ** 40)}:${Math.floor(now / 1000)}:${(now % 1000) * 1000}`;
}
