import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@switchyard/conformance";
import type { Backend } from "@switchyard/core";
import { createGlideMqBackend } from "@switchyard/glidemq-valkey";
import { createQlessBackend } from "@switchyard/qless-redis";
import type { Dialect } from "@switchyard/workerqueue-sql";
import type { Knex } from "knex";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../apps/gateway/src/cli.js";
import { CLI_FROM_SOURCE } from "../apps/gateway/test/helpers.js";
import { legacyDdl, nowSql, rawKnex, rjqueueDdl, urlFor } from "../packages/workerqueue-sql/test/dialects.js";
import { serviceUrl } from "./support/services.js";

/**
 * `switchyard bridge-legacy` as a Rails shop would run it: rows INSERTed into a legacy `jobs` table
 * (the C++ daemon's DDL on MariaDB, the README's migration on PostgreSQL) run on qless or glide-mq
 * workers, the outcome lands back in each row, and a `kill -9` of the bridge midway loses and
 * doubles nothing.
 */
const ROWS = 30;
/** Rows whose job the target's worker fails, to see `error` and `details` written back. */
const failing = (n: number) => n % 10 === 3;

/** The README's ActiveRecord migration (spec §1.1), as PostgreSQL DDL. */
const readmeDdl = (table: string) => [
  `create table ${table} (id serial primary key, name varchar(255) not null, data text, status varchar(255) not null,
    created_at timestamp, updated_at timestamp, duration integer, taskable_id integer, taskable_type varchar(255),
    details text, locked_queue_id varchar(255) not null default '', attempts integer not null default 0)`,
];

interface Scenario {
  table: string;
  dialect: Dialect;
  ddl: (table: string) => string[];
  target: "qless-redis" | "glidemq-valkey";
  /** The legacy producer's INSERT of row n. */
  insert: (db: Knex, table: string, n: number) => Promise<void>;
}

// workq's tests/message.rb INSERT (spec §8.2), JSON data; row 7 holds data no parser reads.
const insertWorkq = (dialect: Dialect) => async (db: Knex, table: string, n: number) => {
  const data = n === 7 ? "{not json" : JSON.stringify({ n });
  await db.raw(
    `insert into ${table} (name, status, attempts, locked_queue_id, data, created_at) values ('thumb', 'pending', 0, '', ?, ${nowSql(dialect)})`,
    [data],
  );
};

// rjqueue's `schedule` (spec §8.1): Ruby YAML with symbol keys, the taskable association, no lock id.
const insertRjqueue = async (db: Knex, table: string, n: number) => {
  await db.raw(
    `insert into ${table} (name, data, taskable_id, taskable_type, status, created_at, updated_at) values ('thumb', ?, ?, 'Photo', 'pending', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`,
    [`--- \n:n: ${n}\n`, 1000 + n],
  );
};

const SCENARIOS: Scenario[] = [
  {
    table: "workqd's DDL on MariaDB",
    dialect: "mysql",
    ddl: (t) => [legacyDdl("mysql", t)],
    target: "qless-redis",
    insert: insertWorkq("mysql"),
  },
  {
    table: "the README's table on PostgreSQL",
    dialect: "postgres",
    ddl: readmeDdl,
    target: "glidemq-valkey",
    insert: insertWorkq("postgres"),
  },
];

const dir = mkdtempSync(join(tmpdir(), "switchyard-bridge-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function startBridge(
  config: string,
  targetQueue: string,
  extra: string[] = [],
): { child: ChildProcess; exited: Promise<number | null>; output: () => string } {
  const args = [
    "bridge-legacy",
    "--config",
    config,
    "--from",
    "legacy",
    "--to",
    "target",
    "--target-queue",
    targetQueue,
    "--interval",
    "50",
    "--batch-size",
    "4",
    ...extra,
  ];
  const child = spawn(process.execPath, [...CLI_FROM_SOURCE, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (chunk) => {
    output += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    output += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, exited, output: () => output };
}

/** A legacy table with rows, a config naming it and the target, and the target's own worker. */
async function setUp(dialect: Dialect, ddl: (table: string) => string[], target: Scenario["target"], insert: Scenario["insert"]) {
  const table = `legacy_${randomBytes(4).toString("hex")}`;
  const targetQueue = `bridge-${randomBytes(4).toString("hex")}`;
  const url = urlFor(dialect);
  const db = rawKnex(url);
  const redisUrl = `${serviceUrl("redis").replace(/\/\d*$/, "")}/12`;
  const backend: Backend = target === "qless-redis" ? createQlessBackend({ url: redisUrl }) : createGlideMqBackend({ url: redisUrl });
  for (const statement of ddl(table)) await db.raw(statement);
  for (let n = 0; n < ROWS; n++) await insert(db, table, n);
  const config = join(dir, `${table}.json`);
  const backends = { legacy: { type: "workerqueue-sql", url, options: { table } }, target: { type: target, url: redisUrl } };
  writeFileSync(config, JSON.stringify({ backends, routes: [{ pattern: "*", backend: "target" }] }));
  await backend.ready();

  // The target's own worker: fails the rows `failing` picks, completes the others, counts every run.
  const runs = new Map<string, number>();
  let working = true;
  const work = (async () => {
    while (working) {
      const jobs = await backend.reserve(targetQueue, { worker: "thumb-worker", count: 5 });
      for (const job of jobs) {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        const n = (job.data as { n?: number } | null)?.n;
        if (typeof n === "number" && failing(n)) {
          await backend.fail(targetQueue, job.id, { worker: "thumb-worker", retry: false, error: { message: `cannot thumbnail ${n}` } });
        } else await backend.complete(targetQueue, job.id, { worker: "thumb-worker" });
      }
      if (jobs.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();

  return {
    table,
    targetQueue,
    db,
    backend,
    config,
    runs,
    finishedRows: async () => Number((await db(table).whereIn("status", ["complete", "error"]).count({ n: "*" }))[0]?.n),
    rows: () =>
      db(table).orderBy("id") as Promise<Array<{ id: number; status: string; details: string | null; data: string; locked?: unknown }>>,
    async tearDown() {
      working = false;
      await work;
      await db.schema.dropTableIfExists(table);
      await db.destroy();
      await backend.close();
    },
  };
}

/** Exactly once: one target job per row, run by the target's worker once; each row ends as its job did. */
async function expectEveryRowOnce(t: Awaited<ReturnType<typeof setUp>>): Promise<void> {
  const rows = await t.rows();
  expect(rows).toHaveLength(ROWS);
  for (const [n, row] of rows.entries()) {
    if (failing(n)) expect(row, `row ${row.id}`).toMatchObject({ status: "error", details: `cannot thumbnail ${n}` });
    else expect(row, `row ${row.id}`).toMatchObject({ status: "complete" });
  }
  expect([...t.runs.keys()].sort()).toEqual(rows.map((row) => `${t.table}-${row.id}`).sort());
  expect([...t.runs.entries()].filter(([, count]) => count !== 1)).toEqual([]);
  const counts = await t.backend.counts(t.targetQueue);
  expect(counts.completed + counts.failed).toBe(ROWS);
}

for (const { table: described, dialect, ddl, target, insert } of SCENARIOS) {
  describe(`bridge-legacy: ${described} onto ${target}`, () => {
    it("every INSERTed row runs once on the target and ends complete or error with details, across a kill -9 of the bridge", async () => {
      const t = await setUp(dialect, ddl, target, insert);
      try {
        const first = startBridge(t.config, t.targetQueue, ["--metrics-port", "0"]);
        await eventually(async () => (await t.finishedRows()) >= ROWS / 3, "a third of the rows to be written back", 60_000);
        // Its progress, as Prometheus scrapes it from the port it printed.
        const metricsUrl = await eventually(async () => /metrics on (http:\S+)/.exec(first.output())?.[1], "the metrics address");
        const scraped = await (await fetch(metricsUrl)).text();
        const rows = (step: string) =>
          Number(new RegExp(`switchyard_bridge_rows_total\\{step="${step}"\\} (\\d+)`).exec(scraped)?.[1] ?? 0);
        expect(rows("enqueued")).toBeGreaterThanOrEqual(rows("complete") + rows("error"));
        expect(rows("complete") + rows("error")).toBeGreaterThan(0);
        expect(scraped).toMatch(/^switchyard_bridge_rows_in_flight \d+$/m);
        first.child.kill("SIGKILL");
        await first.exited;
        expect(await t.finishedRows()).toBeLessThan(ROWS);

        const second = startBridge(t.config, t.targetQueue);
        await eventually(async () => (await t.finishedRows()) === ROWS, "every row to be written back after the restart", 60_000);
        second.child.kill("SIGTERM");
        expect(await second.exited, second.output()).toBe(0);

        await expectEveryRowOnce(t);
        // Data no parser reads went over as text, and stays in the row as the producer wrote it.
        expect((await t.rows())[7]?.data).toBe("{not json");
      } finally {
        await t.tearDown();
      }
    }, 120_000);
  });
}

describe("bridge-legacy: rjqueue's table on SQLite onto qless-redis, with --once", () => {
  it("hands over YAML rows with their taskable, then exits by itself once the table is drained, leaving every row unlocked", async () => {
    const t = await setUp("sqlite", (table) => rjqueueDdl("sqlite", table), "qless-redis", insertRjqueue);
    try {
      const bridge = startBridge(t.config, t.targetQueue, ["--once"]);
      expect(await bridge.exited, bridge.output()).toBe(0);
      await expectEveryRowOnce(t);
      expect((await t.rows()).map((row) => Number(row.locked))).toEqual(Array(ROWS).fill(0));
      const [first] = await t.rows();
      const job = await t.backend.get(t.targetQueue, `${t.table}-${first?.id}`);
      expect(job).toMatchObject({ data: { n: 0 }, native: { workerqueue: { taskable_type: "Photo", taskable_id: 1000 } } });
    } finally {
      await t.tearDown();
    }
  }, 120_000);
});

describe("bridge-legacy: what it refuses", () => {
  const io = { out: () => undefined, err: () => undefined, env: {} };
  const configWith = (backends: Record<string, unknown>) => {
    const file = join(dir, `refuse-${randomBytes(4).toString("hex")}.json`);
    writeFileSync(file, JSON.stringify({ backends, routes: [{ pattern: "*", backend: Object.keys(backends)[0] }] }));
    return file;
  };

  it("a missing --from or --to, a source that is not a legacy table, and a target that forgets finished jobs, each with a message", async () => {
    const sqlite = { type: "workerqueue-sql", url: `sqlite:${join(dir, "refuse.sqlite")}` };
    const qless = { type: "qless-redis", url: `${serviceUrl("redis").replace(/\/\d*$/, "")}/12` };
    const forgetful = { type: "cloudq-mongo", url: serviceUrl("mongo"), options: { completion: "remove" } };
    const config = configWith({ legacy: sqlite, qless, forgetful });
    await expect(runCli(["bridge-legacy", "--config", config, "--to", "qless"], io)).rejects.toThrow("--from and --to are required");
    await expect(runCli(["bridge-legacy", "--config", config, "--from", "qless", "--to", "legacy"], io)).rejects.toThrow(
      '--from "qless" must be a workerqueue-sql backend',
    );
    await expect(runCli(["bridge-legacy", "--config", config, "--from", "legacy", "--to", "forgetful"], io)).rejects.toThrow(
      "keep finished jobs (keepsCompleted)",
    );
    await expect(runCli(["bridge-legacy", "--config", config, "--from", "legacy", "--to", "qless", "--interval", "0"], io)).rejects.toThrow(
      "--interval must be a number",
    );
  });
});
