import { createRequire } from "node:module";
import { ValidationError, setNewest } from "@switchyard/core";
import knexFactory, { type Knex } from "knex";
import { type PgClient, prepareRepeatedStatements } from "./postgres-prepared.js";
import type { LegacyMaster } from "./wake.js";

export type DataFormat = "json" | "yaml";
export type SqliteSynchronous = "normal" | "full";
export type Dialect = "sqlite" | "postgres" | "mysql";

export interface WorkerQueueBackendOptions {
  /** `sqlite:<path>`, `sqlite::memory:`, `postgres://...` or `mysql://...` (MariaDB too). */
  url?: string;
  /** An injected knex instance instead of a URL; the backend then leaves it open on close(). */
  knex?: Knex;
  /** The jobs table; default `jobs`, the name the legacy daemons use. */
  table?: string;
  /** How new rows encode `data`: JSON (workq) or Ruby YAML with symbol keys (rjqueue). Both are read. */
  dataFormat?: DataFormat;
  /** The queue that legacy rows (no `sy_queue`) belong to; default `default`. */
  defaultQueue?: string;
  /** Create the table, or add the missing columns and indexes to a legacy one, in ready(); default true. */
  createSchema?: boolean;
  /**
   * SQLite files only (they run in WAL mode): when a commit reaches the disk. `normal` (the default,
   * as better-sqlite3 builds SQLite and Rails sets it): a commit survives the process being killed,
   * and the last ones may be lost if the machine itself goes down; `full`: each commit is synced to
   * the disk first (a worker's reserve-and-complete cycle over HTTP about 30% slower here).
   */
  sqliteSynchronous?: SqliteSynchronous;
  /**
   * PostgreSQL connections opened from `url`: send a statement text run before as a named (prepared)
   * statement, parsed and planned once per connection (postgres-prepared.ts); default true. Turn it
   * off behind a pooler that hands a session's statements to other server connections (PgBouncer in
   * transaction mode before 1.21).
   */
  preparedStatements?: boolean;
  /**
   * Legacy masters to wake with a UDP datagram after each committed enqueue and each release of due
   * delayed jobs: `host:port` or `workq://host[:port]` (workqd, default port 4488),
   * `rjqueue://host[:port]` (default 4321), or `{host, port, kind}`.
   */
  wakeMasters?: Array<string | LegacyMaster>;
  /**
   * How often ready() starts releasing due delayed jobs for the legacy daemons (which take only rows
   * whose lock is empty), in ms; default 1000, 0 turns the timer off (reserve() still releases).
   */
  releaseDelayedEveryMs?: number;
  /** Called with a datagram that could not be sent or a timed release that failed; they never fail a call. */
  onBackgroundError?: (error: Error) => void;
  /**
   * The current time in epoch ms (default `Date.now`) for what the rows record (created, started,
   * finished, run-at and lease times) and for what is due, delayed or expired; every SQL statement
   * takes its times from here, none from the server. Timers and retry waits keep real time.
   */
  clock?: () => number;
}

/** What the rest of the package works with once options are resolved. */
export interface Store {
  readonly knex: Knex;
  readonly dialect: Dialect;
  readonly table: string;
  /** Side table of paused queue names. */
  readonly pausedTable: string;
  /** Side table of recurring jobs' definitions (recurring.ts). */
  readonly recurringTable: string;
  /** Settled by ready() when the option was not given: `yaml` on an rjqueue table, else `json`. */
  dataFormat: DataFormat;
  /** Whether `dataFormat` was given (then ready() leaves it alone). */
  readonly dataFormatGiven: boolean;
  readonly defaultQueue: string;
  /** What ready() found in the table and server; see detectLayout in schema.ts. */
  readonly layout: Layout;
  /** The backend's clock (the `clock` option): epoch ms. */
  readonly now: () => number;
}

export interface Layout {
  /** rjqueue's boolean `locked` column is there; see `RJQUEUE_LOCKED` in columns.ts. */
  rjqueueLocked: boolean;
  /** PostgreSQL: each column's type name (`int4`, `timestamptz`...), to cast the arrays of a bulk insert. */
  columnTypes: Map<string, string>;
  /** INSERT ... RETURNING works: PostgreSQL, SQLite and MariaDB 10.5+, not MySQL. */
  insertReturning: boolean;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,39}$/;

export function resolveStore(options: WorkerQueueBackendOptions): { store: Store; ownsKnex: boolean; createSchema: boolean } {
  const table = options.table ?? "jobs";
  if (!IDENTIFIER.test(table)) throw new ValidationError(`workerqueue-sql: invalid table name "${table}"`);
  const dataFormat = options.dataFormat ?? "json";
  if (dataFormat !== "json" && dataFormat !== "yaml") {
    throw new ValidationError(`workerqueue-sql: dataFormat must be "json" or "yaml", not "${String(dataFormat)}"`);
  }
  if (options.sqliteSynchronous !== undefined && !["normal", "full"].includes(options.sqliteSynchronous)) {
    throw new ValidationError(`workerqueue-sql: sqliteSynchronous must be "normal" or "full", not "${String(options.sqliteSynchronous)}"`);
  }
  let knex: Knex;
  let ownsKnex: boolean;
  if (options.knex) {
    knex = options.knex;
    ownsKnex = false;
  } else if (options.url) {
    knex = knexFromUrl(options.url, { sqliteSynchronous: options.sqliteSynchronous, preparedStatements: options.preparedStatements });
    ownsKnex = true;
  } else {
    throw new ValidationError("workerqueue-sql: give either `url` or `knex`");
  }
  const store: Store = {
    knex,
    dialect: dialectOf(knex),
    table,
    pausedTable: `${table}_paused_queues`,
    recurringTable: `${table}_sy_recurring`,
    dataFormat,
    dataFormatGiven: options.dataFormat !== undefined,
    defaultQueue: options.defaultQueue ?? "default",
    layout: { rjqueueLocked: false, columnTypes: new Map(), insertReturning: dialectOf(knex) !== "mysql" },
    now: options.clock ?? Date.now,
  };
  return { store, ownsKnex, createSchema: options.createSchema ?? true };
}

function dialectOf(knex: Knex): Dialect {
  const client = String(knex.client.config.client ?? knex.client.dialect ?? "");
  if (/sqlite/i.test(client)) return "sqlite";
  if (/^(pg|postgres|postgresql|pgnative|cockroachdb)$/i.test(client)) return "postgres";
  if (/mysql|maria/i.test(client)) return "mysql";
  throw new ValidationError(`workerqueue-sql: unsupported knex client "${client}" (use better-sqlite3, pg or mysql2)`);
}

const resolveModule = createRequire(import.meta.url).resolve;

/** The driver a URL needs is an optional peer dependency: say which one to install when it is missing. */
function requireDriver(driver: "better-sqlite3" | "pg" | "mysql2", url: string): void {
  try {
    resolveModule(driver);
  } catch {
    const scheme = url.slice(0, url.indexOf(":") + 1);
    throw new ValidationError(`workerqueue-sql: ${scheme} URLs need the ${driver} driver, which is not installed: npm install ${driver}`);
  }
}

/** What of a better-sqlite3 connection is used here. */
interface SqliteConnection {
  pragma(sql: string): unknown;
  prepare(sql: string): unknown;
}

/** Statements kept per SQLite connection, the least recently used dropped first. */
const MOST_PREPARED = 200;

/**
 * knex prepares each query's text again on every call, and on SQLite, where the statements run in
 * this process, preparing was about a fifth of a reserve-and-complete cycle's CPU. The connection
 * keeps its prepared statements by text instead (better-sqlite3 statements may be run again; knex
 * changes none of their settings, as no query here asks for safe integers). Backend reserve +
 * complete-and-next at 50 workers, alternated runs: 2,255-2,513 -> 3,177-3,663 jobs/s.
 */
function reusePreparedStatements(connection: SqliteConnection): void {
  const prepare = connection.prepare.bind(connection);
  const prepared = new Map<string, unknown>();
  connection.prepare = (sql: string) => {
    const statement = prepared.get(sql) ?? prepare(sql);
    setNewest(prepared, sql, statement, MOST_PREPARED);
    return statement;
  };
}

/** Creates a knex instance for a URL; drivers are loaded by knex lazily, so only the one used must be installed. */
export function knexFromUrl(
  url: string,
  {
    sqliteSynchronous = "normal",
    preparedStatements = true,
  }: Pick<WorkerQueueBackendOptions, "sqliteSynchronous" | "preparedStatements"> = {},
): Knex {
  if (url.startsWith("sqlite:")) {
    requireDriver("better-sqlite3", url);
    const filename = url.slice("sqlite:".length).replace(/^\/\//, "") || ":memory:";
    return knexFactory({
      client: "better-sqlite3",
      connection: { filename },
      useNullAsDefault: true,
      pool: {
        afterCreate(connection: SqliteConnection, done: (error: Error | null, connection: unknown) => void) {
          // Several processes (or backends) may share the file: wait for locks rather than fail at once.
          connection.pragma("busy_timeout = 10000");
          if (filename !== ":memory:") connection.pragma("journal_mode = WAL");
          connection.pragma(`synchronous = ${sqliteSynchronous === "full" ? "FULL" : "NORMAL"}`);
          reusePreparedStatements(connection);
          done(null, connection);
        },
      },
    });
  }
  if (/^postgres(ql)?:\/\//.test(url)) {
    requireDriver("pg", url);
    return knexFactory({
      client: "pg",
      connection: url,
      pool: {
        min: 0,
        max: 10,
        afterCreate(connection: PgClient, done: (error: Error | null, connection: unknown) => void) {
          if (preparedStatements) prepareRepeatedStatements(connection);
          done(null, connection);
        },
      },
    });
  }
  if (/^(mysql|mariadb):\/\//.test(url)) {
    requireDriver("mysql2", url);
    return knexFactory({
      client: "mysql2",
      connection: {
        uri: url.replace(/^mariadb:/, "mysql:"),
        supportBigNumbers: true,
        charset: "utf8mb4",
        // A claim's transaction, or an update and its read-back, goes as one query text: one round
        // trip (mysql-script.ts). Values still go as bindings, escaped by the driver.
        multipleStatements: true,
      } as Knex.MySql2ConnectionConfig,
      pool: { min: 0, max: 10 },
    });
  }
  throw new ValidationError(`workerqueue-sql: unsupported url "${url}" (sqlite:, postgres:// or mysql://)`);
}
