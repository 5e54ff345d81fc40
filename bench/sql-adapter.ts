import { mkdtempSync, rmSync } from "node:fs";
/**
 * The Worker Queue SQL adapter alone, on the running servers (`.services/env.json`, or the
 * SWITCHYARD_* variables): statements sent per operation, counted at the driver (every BEGIN and
 * COMMIT counts, as each is a round trip), and jobs per second of the paths issue 13 and 14 set
 * targets for: 1,000-job bulks, the cycle (reserve one, complete it) and a migration-style import of
 * 1,000-job pages each read back in one call, and the chained cycle (completeAndReserve). Never
 * part of `npm test`.
 *
 *   npx tsx --conditions=@switchyard/source bench/sql-adapter.ts [sqlite] [postgres] [mysql]
 */
import { createRequire } from "node:module";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { type Backend, type Job, completeAndReserve } from "@switchyard/core";
import { createWorkerQueueBackend } from "@switchyard/workerqueue-sql";
import knexFactory from "knex";
import { jobRecord } from "../test/support/job-record.js";
import { serviceUrl } from "../test/support/services.js";

type Dialect = "sqlite" | "postgres" | "mysql";
const require = createRequire(import.meta.url);

/** Statements sent to each driver since the start. */
const sent = { count: 0 };

/** Counts every statement the drivers execute, whoever sends it (knex or a prepared statement). */
function countStatements(): void {
  const pg = require("pg") as { Client: { prototype: { query: (...args: unknown[]) => unknown } } };
  const pgQuery = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: unknown, ...args: unknown[]) {
    sent.count++;
    return pgQuery.apply(this, args);
  };
  // Not an exported subpath: loaded by its file name (every connection, pooled or not, is one of these).
  const mysqlRoot = dirname(require.resolve("mysql2"));
  const mysql = require(join(mysqlRoot, "lib/base/connection.js")) as { prototype: Record<string, (...args: unknown[]) => unknown> };
  for (const method of ["query", "execute"]) {
    const original = mysql.prototype[method] as (...args: unknown[]) => unknown;
    mysql.prototype[method] = function (this: unknown, ...args: unknown[]) {
      sent.count++;
      return original.apply(this, args);
    };
  }
  const Database = require("better-sqlite3");
  const statement = Object.getPrototypeOf(new Database(":memory:").prepare("select 1")) as Record<string, (...args: unknown[]) => unknown>;
  for (const method of ["run", "all", "get", "iterate"]) {
    const original = statement[method] as (...args: unknown[]) => unknown;
    statement[method] = function (this: unknown, ...args: unknown[]) {
      sent.count++;
      return original.apply(this, args);
    };
  }
  // Statements knex runs with exec (none on the paths measured) would go uncounted.
}

const job = (i: number) => ({ name: "bench", data: { n: i, payload: "x".repeat(64) } });

function exported(i: number, now: number): Job {
  return jobRecord({
    id: `m${i}`,
    queue: "q",
    name: "migrate-me",
    data: { n: i, payload: "x".repeat(64) },
    maxAttempts: 3,
    createdAt: now - i,
  });
}

/** Statements per call and the time of `n` calls of `call`. */
async function measure(n: number, call: (i: number) => Promise<unknown>, inFlight = 1) {
  const before = sent.count;
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < n) await call(next++);
    }),
  );
  return { ms: performance.now() - started, statements: (sent.count - before) / n };
}

async function benchDialect(dialect: Dialect) {
  const dir = dialect === "sqlite" ? mkdtempSync(join(tmpdir(), "switchyard-bench-sql-")) : undefined;
  const url = dir ? `sqlite:${join(dir, "jobs.sqlite")}` : serviceUrl(dialect === "postgres" ? "postgres" : "mysql");
  const table = `bench_sql_${Date.now().toString(36)}`;
  const backend: Backend = createWorkerQueueBackend({ url, table, releaseDelayedEveryMs: 0 });
  await backend.ready();
  const rows: Record<string, string | number>[] = [];
  const add = (what: string, jobs: number, result: { ms: number; statements: number }, per = "job") =>
    rows.push({ dialect, what, "jobs/s": Math.round((jobs / result.ms) * 1000), [`statements per ${per}`]: +result.statements.toFixed(2) });
  try {
    add("enqueue, 1 in flight", 500, await measure(500, (i) => backend.enqueue("single", job(i))));
    add("enqueue with id, 1 in flight", 300, await measure(300, (i) => backend.enqueue("single", { ...job(i), id: `k${i}` })));
    const bulk = (i: number) => Array.from({ length: 1000 }, (_, j) => job(i * 1000 + j));
    add("enqueueBulk of 1,000", 5000, await measure(5, (i) => backend.enqueueBulk("bulk", bulk(i))), "call");
    const keyed = (i: number) => bulk(i).map((input, j) => ({ ...input, id: `b${i}-${j}` }));
    add("enqueueBulk of 1,000 with ids", 3000, await measure(3, (i) => backend.enqueueBulk("keyed", keyed(i))), "call");
    for (const workers of [1, 10]) {
      const queue = `cycle${workers}`;
      const n = 1000;
      await backend.enqueueBulk(queue, bulk(0).slice(0, n));
      const worker = `w${workers}`;
      const reserve = await measure(
        n,
        async () => {
          const [held] = await backend.reserve(queue, { worker, count: 1 });
          if (!held) throw new Error("the queue ran dry");
          await backend.complete(queue, held.id, { worker, result: { ok: true } });
        },
        workers,
      );
      add(`reserve + complete, ${workers} worker${workers > 1 ? "s" : ""}`, n, reserve);
    }
    {
      // A worker that completes each job and takes the next in the same call (one statement on PostgreSQL).
      const queue = "chained";
      const n = 1000;
      await backend.enqueueBulk(queue, bulk(0).slice(0, n));
      let [held] = await backend.reserve(queue, { worker: "c", count: 1 });
      const chained = await measure(n, async () => {
        if (!held) throw new Error("the queue ran dry");
        const { next } = await completeAndReserve(backend, queue, held.id, { worker: "c" }, { worker: "c" });
        held = next[0];
      });
      add("completeAndReserve, 1 worker", n, chained);
    }
    const now = Date.now();
    const pages = 20;
    add(
      "import a page of 1,000 + getMany",
      pages * 1000,
      await measure(pages, async (p) => {
        const page = Array.from({ length: 1000 }, (_, j) => exported(p * 1000 + j, now));
        await backend.import("imported", page);
        const back = await backend.getMany?.(
          "imported",
          page.map((item) => item.id),
        );
        if (back?.some((item) => item === null)) throw new Error("a job went missing");
      }),
      "page",
    );
  } finally {
    await backend.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    else {
      const knex = knexFactory({ client: dialect === "postgres" ? "pg" : "mysql2", connection: url });
      await knex.schema.dropTableIfExists(table);
      await knex.schema.dropTableIfExists(`${table}_paused_queues`);
      await knex.schema.dropTableIfExists(`${table}_sy_recurring`);
      if (dialect === "postgres") await knex.raw(`drop function if exists ${table}_sy_notify()`);
      await knex.destroy();
    }
  }
  return rows;
}

countStatements();
const chosen = process.argv.slice(2).filter((arg): arg is Dialect => ["sqlite", "postgres", "mysql"].includes(arg));
process.stdout.write(`${cpus().length} x ${cpus()[0]?.model}, Node ${process.version}, load ${loadavg()[0]?.toFixed(2)}\n`);
for (const dialect of chosen.length > 0 ? chosen : (["sqlite", "postgres", "mysql"] as Dialect[])) {
  console.table(await benchDialect(dialect));
}
process.stdout.write(`load ${loadavg()[0]?.toFixed(2)}\n`);
