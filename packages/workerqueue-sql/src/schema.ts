import { isConnectionError } from "@switchyard/core";
import type { Knex } from "knex";
import { ACTIVE_STATUSES, RJQUEUE_LOCKED, STATUS, SY, UNLOCKED } from "./columns.js";
import { installChangeTrigger } from "./event-feed.js";
import type { Dialect, Store } from "./options.js";
import { createRecurringTable } from "./recurring.js";

type ColumnAdder = (table: Knex.CreateTableBuilder) => void;

/**
 * The README (ActiveRecord) layout of the Worker Queue table, minus `id`. A table created by
 * `workqd --install-schema` lacks `duration` and `taskable_*`; ready() adds them.
 */
const LEGACY_COLUMNS: Array<[string, ColumnAdder]> = [
  ["name", (t) => t.string("name", 255).notNullable()],
  ["data", (t) => t.text("data")],
  ["status", (t) => t.string("status", 255).notNullable()],
  ["created_at", (t) => t.datetime("created_at")],
  ["updated_at", (t) => t.datetime("updated_at")],
  ["duration", (t) => t.integer("duration")],
  ["taskable_id", (t) => t.integer("taskable_id")],
  ["taskable_type", (t) => t.string("taskable_type", 255)],
  ["details", (t) => t.text("details")],
  ["locked_queue_id", (t) => t.string("locked_queue_id", 40).notNullable().defaultTo(UNLOCKED)],
  ["attempts", (t) => t.integer("attempts").notNullable().defaultTo(0)],
];

/** What Switchyard adds: nullable, or with a default, so legacy INSERTs need not know about them. */
const SWITCHYARD_COLUMNS: Array<[string, ColumnAdder]> = [
  [SY.queue, (t) => t.string(SY.queue, 255)],
  [SY.jobId, (t) => t.string(SY.jobId, 255)],
  // NOT NULL with a default (rather than nullable) so ORDER BY priority means the same on every dialect.
  [SY.priority, (t) => t.integer(SY.priority).notNullable().defaultTo(0)],
  [SY.runAt, (t) => t.bigInteger(SY.runAt)],
  [SY.worker, (t) => t.string(SY.worker, 255)],
  [SY.leaseUntil, (t) => t.bigInteger(SY.leaseUntil)],
  [SY.maxAttempts, (t) => t.integer(SY.maxAttempts)],
  [SY.backoff, (t) => t.string(SY.backoff, 255)],
  [SY.uniqueKey, (t) => t.string(SY.uniqueKey, 255)],
  [SY.uniqueSlot, (t) => t.string(SY.uniqueSlot, 255)],
  [SY.result, (t) => t.text(SY.result)],
  [SY.progress, (t) => t.text(SY.progress)],
  [SY.errorGroup, (t) => t.string(SY.errorGroup, 255)],
  [SY.tags, (t) => t.text(SY.tags)],
  [SY.dependsOn, (t) => t.text(SY.dependsOn)],
  [SY.hasDependents, (t) => t.boolean(SY.hasDependents)],
  [SY.native, (t) => t.text(SY.native)],
  [SY.createdMs, (t) => t.bigInteger(SY.createdMs)],
  [SY.startedMs, (t) => t.bigInteger(SY.startedMs)],
  [SY.finishedMs, (t) => t.bigInteger(SY.finishedMs)],
  [SY.canceledMs, (t) => t.bigInteger(SY.canceledMs)],
];

interface IndexSpec {
  name: (table: string) => string;
  /** Other names under which an equivalent index may already exist (the Rails migration's). */
  aliases?: (table: string) => string[];
  columns: string[];
  /** Columns the index keeps in descending order (created with raw DDL: knex has no syntax for it). */
  descending?: string[];
  unique: boolean;
  /** The dialects the index is made on; default all. */
  dialects?: Dialect[];
}

const INDEXES: IndexSpec[] = [
  // Listing and export page through a queue in row order (keyset on id): without it SQLite sorts the
  // whole queue for every page, so a million-job export slows to a crawl.
  { name: (t) => `${t}_sy_queue_id_idx`, columns: [SY.queue, "id"], unique: false },
  // The event feed reads the rows changed since its last look (event-feed.ts).
  { name: (t) => `${t}_updated_at_idx`, columns: ["updated_at"], unique: false },
  {
    // The README's `add_index :jobs, [:status, :locked_queue_id]`, which the legacy claim relies on.
    name: (t) => `${t}_status_locked_idx`,
    aliases: (t) => [`index_${t}_on_status_and_locked_queue_id`],
    columns: ["status", "locked_queue_id"],
    unique: false,
  },
  {
    // MySQL/MariaDB read expired leases in it (forced, claim.ts). Not on PostgreSQL, whose claim reads
    // the claim index below for both: on a table it has never analyzed (a bulk load, the first minute
    // of a migration) it estimates any queue at one row, and with this index there chose it and sorted
    // the whole queue for every claim (96-143 ms a claim on a queue of 100,000 jobs, bench/pg-claims.ts);
    // the claim index gives the rows in claim order, so the claim stops at the first ones.
    name: (t) => claimExpiredIndex(t),
    columns: [SY.queue, "status"],
    unique: false,
    dialects: ["mysql", "sqlite"],
  },
  {
    // In the claim's order: InnoDB's locking read then stops at the first rows it takes. Without it,
    // MySQL/MariaDB sort every candidate and SKIP LOCKED's first claimer locks them all, so the
    // others come back empty.
    name: (t) => claimPendingIndex(t),
    columns: [SY.queue, "status", SY.priority, "id"],
    descending: [SY.priority],
    unique: false,
  },
  // Concurrent enqueues with one unique key (or one caller-chosen id) agree on a single row. The key
  // is held in sy_unique_slot, which the finish step clears, so a finished job lets the key go.
  { name: (t) => `${t}_sy_unique_slot_uq`, columns: [SY.queue, SY.uniqueSlot], unique: true },
  { name: (t) => `${t}_sy_job_id_uq`, columns: [SY.queue, SY.jobId], unique: true },
];

/** The index a claim of expired leases reads (MySQL forces it, see claim.ts). */
export function claimExpiredIndex(table: string): string {
  return `${table}_sy_queue_status_idx`;
}

/** The index a claim of pending rows reads, in claim order (MySQL forces it, see claim.ts). */
export function claimPendingIndex(table: string): string {
  return `${table}_sy_claim_idx`;
}

/**
 * Creates the table, or completes a legacy one; idempotent. Several processes may race to do it
 * (the loser's CREATE or ALTER fails with "already exists"): each attempt starts by looking at what
 * is there, so the next attempt finds the winner's work done.
 */
export async function ensureSchema(store: Store, attempts = 5): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await ensureSchemaOnce(store);
    } catch (error) {
      // Only a lost race is worth another look; a server that cannot be reached will not be one in 50 ms.
      if (attempt >= attempts || isConnectionError(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20 * attempt + Math.random() * 50));
    }
  }
}

/**
 * Notes which legacy variant the table is (rjqueue's boolean `locked` or not), the column types a
 * PostgreSQL bulk insert casts its arrays to, and whether a MySQL-family server has INSERT ... RETURNING.
 */
export async function detectLayout(store: Store): Promise<void> {
  const columns = await store.knex(store.table).columnInfo();
  store.layout.rjqueueLocked = Object.hasOwn(columns, RJQUEUE_LOCKED);
  if (store.dialect === "postgres") {
    const { rows } = await store.knex.raw(
      "select column_name, udt_name from information_schema.columns where table_name = ? and table_schema = current_schema()",
      [store.table],
    );
    store.layout.columnTypes = new Map(
      (rows as Array<{ column_name: string; udt_name: string }>).map((row) => [row.column_name, row.udt_name]),
    );
  }
  if (store.dialect === "mysql") {
    const [[server]] = await store.knex.raw("select version() as version");
    const [, major, minor] = /^(\d+)\.(\d+).*mariadb/i.exec(String(server?.version ?? "")) ?? [];
    // MariaDB 10.5 added INSERT ... RETURNING; MySQL has none (its inserts are read back by id).
    store.layout.insertReturning = major !== undefined && Number(major) * 100 + Number(minor) >= 1005;
  }
  // rjqueue's job classes read `@record.data[:id]`: symbol keys, which only the YAML format has.
  if (!store.dataFormatGiven) store.dataFormat = store.layout.rjqueueLocked ? "yaml" : "json";
}

async function ensureSchemaOnce(store: Store): Promise<void> {
  const { knex, table } = store;
  if (!(await knex.schema.hasTable(table))) {
    await knex.schema.createTable(table, (t) => {
      t.increments("id");
      for (const [, add] of [...LEGACY_COLUMNS, ...SWITCHYARD_COLUMNS]) add(t);
    });
  } else {
    const existing = new Set(Object.keys(await knex(table).columnInfo()));
    const missing = [...LEGACY_COLUMNS, ...SWITCHYARD_COLUMNS].filter(([name]) => !existing.has(name));
    if (missing.length > 0) {
      await knex.schema.alterTable(table, (t) => {
        for (const [, add] of missing) add(t);
      });
    }
  }
  const indexes = await indexNames(store);
  await moveUniqueKeyIndex(store, indexes);
  if (store.dialect === "postgres" && indexes.has(claimExpiredIndex(table).toLowerCase())) {
    // Made by versions before the one that left it out on PostgreSQL (see INDEXES); concurrently, so
    // that the claims and enqueues of other gateways on the table do not wait for the drop.
    await knex.raw("drop index concurrently if exists ??", [claimExpiredIndex(table)]);
  }
  for (const spec of INDEXES) {
    if (spec.dialects && !spec.dialects.includes(store.dialect)) continue;
    const names = [spec.name(table), ...(spec.aliases?.(table) ?? [])];
    if (names.some((name) => indexes.has(name.toLowerCase()))) continue;
    const descending = spec.descending ?? [];
    if (descending.length > 0) {
      const columns = spec.columns.map((column) => (descending.includes(column) ? "?? desc" : "??")).join(", ");
      await knex.raw(`create index ?? on ?? (${columns})`, [spec.name(table), table, ...spec.columns]);
      continue;
    }
    await knex.schema.alterTable(table, (t) => {
      if (spec.unique) t.unique(spec.columns, { indexName: spec.name(table) });
      else t.index(spec.columns, spec.name(table));
    });
  }
  if (!(await knex.schema.hasTable(store.pausedTable))) {
    await knex.schema.createTable(store.pausedTable, (t) => {
      t.string("queue", 255).primary();
      t.bigInteger("paused_ms").notNullable();
    });
  }
  await createRecurringTable(store);
  if (store.dialect === "postgres") await installChangeTrigger(store);
  await detectLayout(store);
}

/**
 * Tables from before sy_unique_slot had their unique index on (sy_queue, sy_unique_key), which held
 * a key forever: unfinished rows get their key copied into the slot, and the old index goes.
 */
async function moveUniqueKeyIndex(store: Store, indexes: Set<string>): Promise<void> {
  const { knex, table } = store;
  const old = `${table}_sy_unique_key_uq`;
  if (!indexes.has(old.toLowerCase())) return;
  await knex(table)
    .whereNotNull(SY.uniqueKey)
    .whereNull(SY.uniqueSlot)
    .whereIn("status", [STATUS.pending, ...ACTIVE_STATUSES])
    .update({ [SY.uniqueSlot]: knex.ref(SY.uniqueKey) });
  await knex.schema.alterTable(table, (t) => t.dropUnique([SY.queue, SY.uniqueKey], old));
  indexes.delete(old.toLowerCase());
}

async function indexNames(store: Store): Promise<Set<string>> {
  const { knex, table } = store;
  let rows: Array<{ name: string }>;
  if (store.dialect === "postgres") {
    rows = (await knex.raw("select indexname as name from pg_indexes where tablename = ? and schemaname = current_schema()", [table])).rows;
  } else if (store.dialect === "mysql") {
    const [found] = await knex.raw(
      "select distinct index_name as name from information_schema.statistics where table_schema = database() and table_name = ?",
      [table],
    );
    rows = found ?? [];
  } else {
    rows = await knex.raw("select name from sqlite_master where type = 'index' and tbl_name = ?", [table]);
  }
  return new Set(rows.map((row) => String(row.name).toLowerCase()));
}
