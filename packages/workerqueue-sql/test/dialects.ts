import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { Backend } from "@switchyard/core";
import knexFactory, { type Knex } from "knex";
import { afterAll } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { type Dialect, type WorkerQueueBackendOptions, createWorkerQueueBackend } from "../src/index.js";
import { knexFromUrl } from "../src/options.js";
import { type PgClient, prepareRepeatedStatements } from "../src/postgres-prepared.js";

/** The three databases every Worker Queue test runs on; SQLite is a fresh file per test file. */
export const DIALECTS: Dialect[] = ["sqlite", "postgres", "mysql"];

export function urlFor(dialect: Dialect): string {
  if (dialect === "sqlite") return `sqlite:${join(mkdtempSync(join(tmpdir(), "switchyard-wq-")), "jobs.sqlite")}`;
  return serviceUrl(dialect);
}

/** Removes the temporary directory of a SQLite test database (no-op for server URLs). */
export function removeSqliteFile(url: string): void {
  if (url.startsWith("sqlite:") && url.includes("switchyard-wq-"))
    rmSync(dirname(url.slice("sqlite:".length)), { recursive: true, force: true });
}

/** A table name no other test run uses, so parallel files never collide on one server. */
export function randomTable(prefix = "wq"): string {
  return `${prefix}_${randomBytes(5).toString("hex")}`;
}

/**
 * PostgreSQL on one connection that names repeated statements as a URL-made store's connections do
 * (postgres-prepared.ts): the one session whose prepared statements a test can read.
 */
export function singlePreparedConnection(url: string, options?: Parameters<typeof prepareRepeatedStatements>[1]): Knex {
  return knexFactory({
    client: "pg",
    connection: url,
    pool: {
      min: 1,
      max: 1,
      afterCreate(connection: PgClient, done: (error: Error | null, connection: unknown) => void) {
        prepareRepeatedStatements(connection, options);
        done(null, connection);
      },
    },
  });
}

/** A direct connection for probes and legacy-style SQL, independent of the backend under test. */
export function rawKnex(url: string): Knex {
  return knexFromUrl(url);
}

/** A statement run on a SQLite connection: its text and bindings. */
export interface RanStatement {
  sql: string;
  bindings: unknown[];
}

type RecordedStatement = Record<"all" | "get" | "run", (...bindings: unknown[]) => unknown>;
type RecordedTransaction = { immediate(...args: unknown[]): unknown };

/**
 * Records in `ran` every statement run on the SQLite connection of `knex` (better-sqlite3, one
 * connection in its pool): knex's queries, and those the backend runs on the connection directly
 * (sqlite-statements.ts), which knex's query events do not see, and as `begin immediate` each
 * transaction those begin. Call it before the backend's first call.
 */
export async function recordSqliteStatements(knex: Knex, ran: RanStatement[]): Promise<void> {
  const connection = (await knex.client.acquireConnection()) as {
    prepare(sql: string): RecordedStatement;
    transaction(work: () => unknown): RecordedTransaction;
  };
  const transaction = connection.transaction.bind(connection);
  connection.transaction = (work) => {
    const begun = transaction(work);
    return {
      immediate: (...args: unknown[]) => {
        ran.push({ sql: "begin immediate", bindings: [] });
        return begun.immediate(...args);
      },
    };
  };
  const prepare = connection.prepare.bind(connection);
  const recorded = new WeakSet<RecordedStatement>();
  connection.prepare = (sql: string) => {
    const statement = prepare(sql);
    if (recorded.has(statement)) return statement;
    recorded.add(statement);
    for (const method of ["all", "get", "run"] as const) {
      const original = statement[method].bind(statement);
      statement[method] = (...bindings: unknown[]) => {
        ran.push({ sql, bindings: bindings.flat() });
        return original(...bindings);
      };
    }
    return statement;
  };
  await knex.client.releaseConnection(connection);
}

/** The dialect's spelling of MySQL's NOW() in a legacy INSERT. */
export function nowSql(dialect: Dialect): string {
  return dialect === "sqlite" ? "CURRENT_TIMESTAMP" : "NOW()";
}

/** The `workqd --install-schema` DDL (spec §1.2) in each dialect. */
export function legacyDdl(dialect: Dialect, table: string): string {
  if (dialect === "mysql") {
    return `create table ${table} ( id int(11) not null auto_increment,
      name varchar(255) NOT NULL, status varchar(255) NOT NULL,
      attempts int(11) default 0, locked_queue_id varchar(40) default '',
      data TEXT, details TEXT, created_at datetime, updated_at datetime,
      PRIMARY KEY (id) ) ENGINE=InnoDB DEFAULT CHARSET=utf8`;
  }
  const id = dialect === "postgres" ? "id serial primary key" : "id integer primary key autoincrement";
  const datetime = dialect === "postgres" ? "timestamp" : "datetime";
  return `create table ${table} ( ${id},
    name varchar(255) NOT NULL, status varchar(255) NOT NULL,
    attempts int default 0, locked_queue_id varchar(40) default '',
    data TEXT, details TEXT, created_at ${datetime}, updated_at ${datetime} )`;
}

/** rjqueue's table (lib/jobs/migrate.rb, spec §1.3): boolean `locked`, nullable status, no lock id. */
export function rjqueueDdl(dialect: Dialect, table: string): string[] {
  const id =
    dialect === "mysql"
      ? "id int(11) not null auto_increment primary key"
      : dialect === "postgres"
        ? "id serial primary key"
        : "id integer primary key autoincrement";
  const datetime = dialect === "postgres" ? "timestamp" : "datetime";
  const locked =
    dialect === "mysql"
      ? "tinyint(1) default 0 not null"
      : dialect === "postgres"
        ? "boolean default false not null"
        : "boolean default 0 not null";
  return [
    `create table ${table} ( ${id}, name varchar(255) not null, data text, status varchar(255),
      created_at ${datetime}, updated_at ${datetime}, duration int, taskable_id int, taskable_type varchar(255),
      details text, locked ${locked}, attempts int default 0 not null )`,
    `create index index_${table}_on_status_and_locked on ${table} (status, locked)`,
  ];
}

export { knexFactory };

/**
 * One table of a describe block on one dialect: backends opened on it are closed, and the table and
 * its SQLite file removed, after the block. `row(id)` reads the native row directly.
 */
export function useDialectTable(dialect: Dialect, prefix: string) {
  const url = urlFor(dialect);
  const table = randomTable(prefix);
  const db = rawKnex(url);
  const backends: Backend[] = [];
  afterAll(async () => {
    await Promise.all(backends.map((b) => b.close()));
    await db.schema.dropTableIfExists(table);
    await db.schema.dropTableIfExists(`${table}_paused_queues`);
    await db.schema.dropTableIfExists(`${table}_sy_recurring`);
    await db.destroy();
    removeSqliteFile(url);
  });
  let n = 0;
  return {
    url,
    table,
    db,
    /** Backends closed after the block; push one opened on another table to have it closed too. */
    backends,
    open: async (options: Partial<WorkerQueueBackendOptions> = {}) => {
      const backend = createWorkerQueueBackend({ url, table, ...options });
      backends.push(backend);
      await backend.ready();
      return backend;
    },
    queue: (name = prefix) => `${name}-${dialect}-${++n}-${Math.random().toString(36).slice(2, 8)}`,
    row: async (id: string) => (await db(table).where("id", Number(id)).first()) as Record<string, unknown>,
  };
}
