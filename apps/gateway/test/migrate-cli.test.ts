import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Backend } from "@switchyard/core";
import { createWorkerQueueBackend, workerQueueAdapter } from "@switchyard/workerqueue-sql";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADAPTERS } from "../src/adapters.js";
import { runCli } from "../src/cli.js";
import { MigrateError } from "../src/migrate-command.js";
import { CLI_FROM_SOURCE } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "switchyard-migrate-cli-"));
const sqliteUrl = (name: string) => `sqlite:${join(dir, name)}`;

/** Probe: the native rows of a queue in a SQLite file, read directly. */
function rowsOf(file: string, queue: string): Array<{ name: string; status: string; attempts: number }> {
  const db = new Database(join(dir, file), { readonly: true, fileMustExist: true });
  try {
    return db.prepare("select name, status, attempts from jobs where sy_queue = ? order by id").all(queue) as Array<{
      name: string;
      status: string;
      attempts: number;
    }>;
  } finally {
    db.close();
  }
}

/** A config naming the source and one target per test; each test copies into its own target file. */
function writeConfig(target: string, extra: Record<string, { type: string; url: string }> = {}): string {
  const file = join(dir, `${target}.json`);
  const backends = {
    old: { type: "workerqueue-sql", url: sqliteUrl("old.sqlite") },
    [target]: { type: "workerqueue-sql", url: sqliteUrl(`${target}.sqlite`) },
    ...extra,
  };
  writeFileSync(file, JSON.stringify({ backends, routes: [{ pattern: "*", backend: "old" }] }));
  return file;
}

function capture() {
  const io = { out: "", err: "", env: {} as Record<string, string> };
  return {
    output: io,
    io: {
      out: (text: string) => {
        io.out += text;
      },
      err: (text: string) => {
        io.err += text;
      },
      env: io.env,
    },
  };
}

/** Runs the `switchyard` command (its TypeScript sources through tsx) to its exit. */
async function runBin(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [...CLI_FROM_SOURCE, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr.on("data", (chunk) => {
    err += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  return { code, out, err };
}

let source: Backend;
const QUEUE = "invoices";

beforeAll(async () => {
  source = createWorkerQueueBackend({ url: sqliteUrl("old.sqlite") });
  await source.ready();
  for (let n = 1; n <= 5; n++) await source.enqueue(QUEUE, { name: `invoice-${n}`, data: { n } });
  await source.reserve(QUEUE, { worker: "legacy" });
});
afterAll(async () => {
  await source.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("switchyard migrate", () => {
  it("copies every job to the target, printing a progress line per page to stderr and the JSON report to stdout", async () => {
    const config = writeConfig("copy");
    const { io, output } = capture();
    await runCli(["migrate", "--config", config, "--from", "old", "--to", "copy", "--queue", QUEUE, "--batch-size", "2"], io);
    expect(JSON.parse(output.out)).toEqual({
      from: "old",
      to: "copy",
      queue: QUEUE,
      targetQueue: QUEUE,
      read: 5,
      imported: 5,
      skipped: 0,
      cursor: null,
      missing: [],
      clashes: [],
    });
    const lines = output.err.trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^switchyard migrate: read 2 of ~5 \(40%\), imported 2, skipped 0; resume with --resume \S+$/);
    expect(lines[2]).toMatch(/read 5 of ~5 \(100%\), imported 5, skipped 0; source exhausted/);
    const rows = rowsOf("copy.sqlite", QUEUE);
    expect(rows.map((row) => row.name)).toEqual(["invoice-1", "invoice-2", "invoice-3", "invoice-4", "invoice-5"]);
    // The job the legacy worker held arrives pending with its attempt counted.
    expect(rows[0]).toMatchObject({ status: "pending", attempts: 1 });
  });

  it("running the same migration again imports nothing and reports every job as skipped", async () => {
    const config = writeConfig("again");
    const args = ["migrate", "--config", config, "--from", "old", "--to", "again", "--queue", QUEUE];
    await runCli(args, capture().io);
    const { io, output } = capture();
    await runCli(args, io);
    // The skipped jobs are the same jobs, so none is a clash.
    expect(JSON.parse(output.out)).toMatchObject({ read: 5, imported: 0, skipped: 5, missing: [], clashes: [] });
    expect(rowsOf("again.sqlite", QUEUE)).toHaveLength(5);
  });

  it("--resume with the cursor of a progress line copies only the jobs after it; --target-queue renames the queue", async () => {
    const first = capture();
    await runCli(["migrate", "-c", writeConfig("full"), "--from", "old", "--to", "full", "--queue", QUEUE, "--batch-size", "2"], first.io);
    const cursor = /--resume (\S+)/.exec(first.output.err)?.[1];
    expect(cursor).toBeDefined();
    const { io, output } = capture();
    const args = ["--from", "old", "--to", "resumed", "--queue", QUEUE, "--target-queue", "billing", "--resume", cursor!];
    await runCli(["migrate", "-c", writeConfig("resumed"), ...args], io);
    expect(JSON.parse(output.out)).toMatchObject({ targetQueue: "billing", read: 3, imported: 3, missing: [] });
    expect(rowsOf("resumed.sqlite", "billing").map((row) => row.name)).toEqual(["invoice-3", "invoice-4", "invoice-5"]);
  });

  it("within one backend, --target-queue copies the queue beside itself", async () => {
    const { io, output } = capture();
    await runCli(
      ["migrate", "-c", writeConfig("same"), "--from", "old", "--to", "old", "--queue", QUEUE, "--target-queue", "copy-of-invoices"],
      io,
    );
    expect(JSON.parse(output.out)).toMatchObject({ read: 5, imported: 5, missing: [] });
    expect(rowsOf("old.sqlite", "copy-of-invoices")).toHaveLength(5);
    expect(rowsOf("old.sqlite", QUEUE)).toHaveLength(5);
  });

  it("refuses a missing option, an unknown backend name and a bad batch size with a message naming them", async () => {
    const config = writeConfig("refused");
    const { io } = capture();
    await expect(runCli(["migrate", "--config", config, "--from", "old", "--queue", QUEUE], io)).rejects.toThrow(
      /--from, --to and --queue are required/,
    );
    await expect(runCli(["migrate", "-c", config, "--from", "old", "--to", "nowhere", "--queue", QUEUE], io)).rejects.toThrow(
      /--to "nowhere" names no backend in config file .*refused\.json \(known: old, refused\)/,
    );
    const badSize = ["migrate", "-c", config, "--from", "old", "--to", "refused", "--queue", QUEUE, "--batch-size", "0"];
    await expect(runCli(badSize, io)).rejects.toThrow(/--batch-size must be a number from 1/);
    await expect(runCli(["migrate", "-c", config, "--from", "old", "--to", "old", "--queue", QUEUE], io)).rejects.toThrow(
      /both "old": give a --target-queue/,
    );
  });

  it("reports jobs that did not arrive, after printing the report, and fails", async () => {
    const config = writeConfig("lossy");
    // A target that acknowledges every import but drops the first job: the verification must notice.
    const adapters = withSqlite((options) => {
      const backend = workerQueueAdapter.create(options);
      if (!options.url.endsWith("lossy.sqlite")) return backend;
      const importAll = backend.import.bind(backend);
      backend.import = async (queue, jobs) => ({ ...(await importAll(queue, jobs.slice(1))), imported: jobs.length });
      return backend;
    });
    const { io, output } = capture();
    const run = runCli(["migrate", "-c", config, "--from", "old", "--to", "lossy", "--queue", QUEUE], io, adapters);
    await expect(run).rejects.toThrow(MigrateError);
    await expect(run).rejects.toThrow(/1 job\(s\) read from old are missing from lossy after the migration: 1$/);
    expect(JSON.parse(output.out)).toMatchObject({ read: 5, missing: ["1"] });
  });

  it("a source job whose id the target already uses for another job is reported as a clash and fails the command", async () => {
    const config = writeConfig("occupied");
    const occupied = createWorkerQueueBackend({ url: sqliteUrl("occupied.sqlite") });
    await occupied.ready();
    await occupied.enqueue(QUEUE, { name: "someone-else", id: "2" });
    await occupied.close();
    const { io, output } = capture();
    const run = runCli(["migrate", "-c", config, "--from", "old", "--to", "occupied", "--queue", QUEUE], io);
    await expect(run).rejects.toThrow(
      /1 job\(s\) of old were not copied: occupied already holds other jobs with their ids in queue "invoices": 2;/,
    );
    expect(JSON.parse(output.out)).toMatchObject({ read: 5, imported: 4, skipped: 1, missing: [], clashes: ["2"] });
  });

  it("a migration that stops mid-way fails with the cursor to resume from, and resuming with it copies the rest", async () => {
    const config = writeConfig("flaky");
    // The target's second import fails as a dropped connection would.
    let imports = 0;
    const adapters = withSqlite((options) => {
      const backend = workerQueueAdapter.create(options);
      if (!options.url.endsWith("flaky.sqlite")) return backend;
      const importAll = backend.import.bind(backend);
      backend.import = async (queue, jobs) => {
        if (++imports === 2) throw new Error("connection reset");
        return importAll(queue, jobs);
      };
      return backend;
    });
    const args = ["-c", config, "--from", "old", "--to", "flaky", "--queue", QUEUE, "--batch-size", "2"];
    const stopped = await runCli(["migrate", ...args], capture().io, adapters).catch((error: Error) => error);
    expect(stopped).toBeInstanceOf(MigrateError);
    const message = (stopped as Error).message;
    expect(message).toMatch(/stopped after 2 job\(s\): connection reset; resume with --resume \S+$/);
    expect(rowsOf("flaky.sqlite", QUEUE)).toHaveLength(2);

    const { io, output } = capture();
    await runCli(["migrate", ...args, "--resume", /--resume (\S+)$/.exec(message)![1]!], io, adapters);
    expect(JSON.parse(output.out)).toMatchObject({ read: 3, imported: 3, skipped: 0, missing: [] });
    expect(rowsOf("flaky.sqlite", QUEUE).map((row) => row.name)).toEqual(["invoice-1", "invoice-2", "invoice-3", "invoice-4", "invoice-5"]);
  });

  it("the switchyard binary prints only the report on stdout and exits 0", async () => {
    const run = await runBin(["migrate", "-c", writeConfig("bin"), "--from", "old", "--to", "bin", "--queue", QUEUE]);
    expect(run.code, run.err).toBe(0);
    expect(JSON.parse(run.out)).toMatchObject({ read: 5, imported: 5, missing: [] });
    expect(run.err).toMatch(/read 5 of ~5 \(100%\), imported 5, skipped 0; source exhausted/);
  });

  it("the switchyard binary exits 1 with a clear message when a backend is unreachable (SQL or Redis)", async () => {
    const config = writeConfig("down", {
      pg: { type: "workerqueue-sql", url: "postgres://nobody@127.0.0.1:1/none" },
      glide: { type: "glidemq-valkey", url: "redis://127.0.0.1:1/0" },
    });
    const pg = await runBin(["migrate", "-c", config, "--from", "old", "--to", "pg", "--queue", QUEUE]);
    expect(pg.code).toBe(1);
    expect(pg.err).toMatch(
      /(^|\n)switchyard: backends\.pg: workerqueue-sql backend at postgres:\/\/nobody@127\.0\.0\.1:1\/none is not reachable/,
    );
    expect(pg.out).toBe("");
    // ioredis keeps reconnecting a client that never connected; the command must still end.
    const glide = await runBin(["migrate", "-c", config, "--from", "old", "--to", "glide", "--queue", QUEUE]);
    expect(glide.code).toBe(1);
    expect(glide.err).toMatch(/(^|\n)switchyard: backends\.glide: glidemq-valkey backend at redis:\/\/127\.0\.0\.1:1\/0 is not reachable/);
  });
});

/** The gateway's adapters with the SQLite one built by `create` instead, to make a target misbehave. */
function withSqlite(create: (typeof workerQueueAdapter)["create"]) {
  return ADAPTERS.map((adapter) => (adapter.type === workerQueueAdapter.type ? { ...workerQueueAdapter, create } : adapter));
}
