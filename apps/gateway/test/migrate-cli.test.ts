import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Backend } from "@switchyard/core";
import { createWorkerQueueBackend, workerQueueAdapter } from "@switchyard/workerqueue-sql";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { ADAPTERS } from "../src/adapters.js";
import { runCli } from "../src/cli.js";
import { MigrateError } from "../src/migrate/command.js";
import { CLI_FROM_SOURCE, until } from "./helpers.js";

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
const OTHER = "receipts";

beforeAll(async () => {
  source = createWorkerQueueBackend({ url: sqliteUrl("old.sqlite") });
  await source.ready();
  for (let n = 1; n <= 5; n++) await source.enqueue(QUEUE, { name: `invoice-${n}`, data: { n } });
  await source.reserve(QUEUE, { worker: "legacy" });
  await source.enqueueBulk(OTHER, [
    { name: "receipt-1", tags: ["eu"] },
    { name: "receipt-2", delay: 60_000 },
  ]);
});

/** The JSON progress lines a run wrote to stderr. */
const progressLines = (err: string) =>
  err
    .trim()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);

const checkpointIn = (name: string) => join(dir, `${name}.checkpoint.json`);
afterAll(async () => {
  await source.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * `switchyard migrate` of QUEUE into `<name>.sqlite` by pages of two, whose second import fails as a
 * dropped connection would: its arguments (without the command), adapters, and what the run threw.
 */
async function stoppedAtSecondPage(name: string) {
  const adapters = secondImportFails(name);
  const args = [
    "-c",
    writeConfig(name),
    "--from",
    "old",
    "--to",
    name,
    "--queue",
    QUEUE,
    "--batch-size",
    "2",
    "--checkpoint",
    checkpointIn(name),
  ];
  const stopped = await runCli(["migrate", ...args], capture().io, adapters).catch((error: Error) => error);
  return { args, adapters, stopped };
}

/** Adapters whose SQLite target `<name>.sqlite` fails its second import, as a dropped connection would. */
function secondImportFails(name: string) {
  let imports = 0;
  return withSqlite(async (options) => {
    const backend = await workerQueueAdapter.create(options);
    if (!options.url.endsWith(`${name}.sqlite`)) return backend;
    const importAll = backend.import.bind(backend);
    backend.import = async (queue, jobs) => {
      if (++imports === 2) throw new Error("connection reset");
      return importAll(queue, jobs);
    };
    return backend;
  });
}

describe("switchyard migrate", () => {
  it("copies every queue of the source, a JSON progress line per page on stderr, the report with checksums on stdout", async () => {
    const { io, output } = capture();
    const args = [
      "migrate",
      "-c",
      writeConfig("copy"),
      "--from",
      "old",
      "--to",
      "copy",
      "--batch-size",
      "2",
      "--checkpoint",
      checkpointIn("copy"),
    ];
    await runCli(args, io);
    const report = JSON.parse(output.out);
    expect(report.queues.map((q: { queue: string }) => q.queue)).toEqual([QUEUE, OTHER]);
    expect(report.queues[0]).toMatchObject({
      queue: QUEUE,
      targetQueue: QUEUE,
      read: 5,
      imported: 5,
      skipped: 0,
      missing: [],
      clashes: [],
    });
    const verification = report.queues[0].verification;
    // The migration's own checksums agreed: neither store was read again to verify.
    expect(verification).toMatchObject({ equal: true, differing: [], readAgain: false });
    // The job the legacy worker held arrives waiting: one waiting checksum covers all five.
    expect(verification.states.waiting.source).toEqual(verification.states.waiting.target);
    expect(verification.states.waiting.source.jobs).toBe(5);
    expect(report.queues[1].verification.states).toMatchObject({ waiting: { source: { jobs: 1 } }, delayed: { source: { jobs: 1 } } });

    const lines = progressLines(output.err);
    expect(lines.filter((line) => line.queue === QUEUE).map((line) => line.read)).toEqual([2, 4, 5]);
    expect(lines[0]).toMatchObject({ queue: QUEUE, read: 2, imported: 2, skipped: 0, total: 5, rate: expect.any(Number) });
    const rows = rowsOf("copy.sqlite", QUEUE);
    expect(rows.map((row) => row.name)).toEqual(["invoice-1", "invoice-2", "invoice-3", "invoice-4", "invoice-5"]);
    expect(rows[0]).toMatchObject({ status: "pending", attempts: 1 });
    const checkpoint = JSON.parse(readFileSync(checkpointIn("copy"), "utf8"));
    expect(checkpoint.queues[QUEUE]).toMatchObject({ done: true, read: 5, imported: 5 });
  });

  it("running the same migration again imports nothing and reports every job as skipped", async () => {
    const config = writeConfig("again");
    const args = ["migrate", "--config", config, "--from", "old", "--to", "again", "--queue", QUEUE, "--checkpoint", checkpointIn("again")];
    await runCli(args, capture().io);
    const { io, output } = capture();
    await runCli(args, io);
    // The skipped jobs are the same jobs, so none is a clash.
    expect(JSON.parse(output.out).queues[0]).toMatchObject({ read: 5, imported: 0, skipped: 5, missing: [], clashes: [] });
    expect(rowsOf("again.sqlite", QUEUE)).toHaveLength(5);
  });

  it("takes URLs for --from and --to, --states for some states, and --target-queue within one store", async () => {
    const { io, output } = capture();
    const target = sqliteUrl("by-url.sqlite");
    await runCli(
      [
        "migrate",
        "--from",
        sqliteUrl("old.sqlite"),
        "--to",
        target,
        "--queue",
        OTHER,
        "--states",
        "delayed",
        "--checkpoint",
        checkpointIn("url"),
      ],
      io,
    );
    expect(JSON.parse(output.out).queues[0]).toMatchObject({ read: 2, imported: 1, excluded: 1, verification: { equal: true } });
    expect(rowsOf("by-url.sqlite", OTHER).map((row) => row.name)).toEqual(["receipt-2"]);

    const same = capture();
    const within = [
      "migrate",
      "-c",
      writeConfig("same"),
      "--from",
      "old",
      "--to",
      "old",
      "--queue",
      QUEUE,
      "--target-queue",
      "copy-of-invoices",
    ];
    await runCli([...within, "--checkpoint", checkpointIn("same")], same.io);
    expect(JSON.parse(same.output.out).queues[0]).toMatchObject({ read: 5, imported: 5, verification: { equal: true } });
    expect(rowsOf("old.sqlite", "copy-of-invoices")).toHaveLength(5);
    expect(rowsOf("old.sqlite", QUEUE)).toHaveLength(5);
  });

  it("--dry-run prints the jobs per queue and state and what the target cannot hold, and writes nothing", async () => {
    const { io, output } = capture();
    const target = `${serviceUrl("redis")}?type=glidemq`;
    await runCli(["migrate", "-c", writeConfig("dry"), "--from", "old", "--to", target, "--dry-run"], io);
    const report = JSON.parse(output.out);
    expect(report).toMatchObject({ dryRun: true, to: expect.stringMatching(/^redis:/) });
    expect(report.queues).toEqual(
      expect.arrayContaining([
        { queue: QUEUE, jobs: { waiting: 4, active: 1 }, targetCannotHold: {} },
        { queue: OTHER, jobs: { waiting: 1, delayed: 1 }, targetCannotHold: { "jobs with tags (tags)": 1 } },
      ]),
    );
    expect(existsSync("switchyard-migrate.checkpoint.json")).toBe(false);
  });

  it("refuses a missing option, an unknown backend, a bad batch size or state list, and a resume with no checkpoint", async () => {
    const config = writeConfig("refused");
    const { io } = capture();
    await expect(runCli(["migrate", "--config", config, "--from", "old"], io)).rejects.toThrow(/--from and --to are required/);
    await expect(runCli(["migrate", "-c", config, "--from", "old", "--to", "nowhere"], io)).rejects.toThrow(
      /--to "nowhere" is neither a backend of the configuration \(known: old, refused\) nor a URL/,
    );
    await expect(runCli(["migrate", "-c", config, "--from", "old", "--to", "redis://127.0.0.1:6379/0"], io)).rejects.toThrow(
      /say which layout the store holds, e.g. redis:\/\/127.0.0.1:6379\/0\?type=qless/,
    );
    await expect(runCli(["migrate", "-c", config, "--from", "old", "--to", "refused", "--batch-size", "0"], io)).rejects.toThrow(
      /--batch-size must be a number from 1/,
    );
    await expect(runCli(["migrate", "-c", config, "--from", "old", "--to", "refused", "--states", "waiting,done"], io)).rejects.toThrow(
      /--states takes a comma-separated list of waiting, delayed/,
    );
    await expect(runCli(["migrate", "-c", config, "--from", "old", "--to", "refused", "--target-queue", "x"], io)).rejects.toThrow(
      /--target-queue renames one queue/,
    );
    await expect(runCli(["migrate", "-c", config, "--from", "old", "--to", "old", "--queue", QUEUE], io)).rejects.toThrow(
      /both "old": give a --target-queue/,
    );
    const resume = ["migrate", "-c", config, "--from", "old", "--to", "refused", "--resume", "--checkpoint", checkpointIn("none")];
    await expect(runCli(resume, io)).rejects.toThrow(/--resume: no checkpoint at/);
  });

  it("reports jobs that did not arrive, after printing the report, and fails", async () => {
    const config = writeConfig("lossy");
    // A target that acknowledges every import but drops the first job: the verification must notice.
    const adapters = withSqlite(async (options) => {
      const backend = await workerQueueAdapter.create(options);
      if (!options.url.endsWith("lossy.sqlite")) return backend;
      const importAll = backend.import.bind(backend);
      backend.import = async (queue, jobs) => ({ ...(await importAll(queue, jobs.slice(1))), imported: jobs.length });
      return backend;
    });
    const { io, output } = capture();
    const run = runCli(
      ["migrate", "-c", config, "--from", "old", "--to", "lossy", "--queue", QUEUE, "--checkpoint", checkpointIn("lossy")],
      io,
      adapters,
    );
    await expect(run).rejects.toThrow(MigrateError);
    await expect(run).rejects.toThrow(/queue "invoices": 1 job\(s\) read from old are missing from lossy: 1$/);
    expect(JSON.parse(output.out).queues[0]).toMatchObject({ read: 5, missing: ["1"], verification: { equal: false, differing: ["1"] } });
  });

  it("a source job whose id the target already uses for another job is reported as a clash and fails the command", async () => {
    const config = writeConfig("occupied");
    const occupied = createWorkerQueueBackend({ url: sqliteUrl("occupied.sqlite") });
    await occupied.ready();
    await occupied.enqueue(QUEUE, { name: "someone-else", id: "2" });
    await occupied.close();
    const { io, output } = capture();
    const run = runCli(
      ["migrate", "-c", config, "--from", "old", "--to", "occupied", "--queue", QUEUE, "--checkpoint", checkpointIn("occupied")],
      io,
    );
    await expect(run).rejects.toThrow(
      /1 job\(s\) of old were not copied: occupied already holds other jobs with their ids in queue "invoices": 2;/,
    );
    expect(JSON.parse(output.out).queues[0]).toMatchObject({ read: 5, imported: 4, skipped: 1, missing: [], clashes: ["2"] });
  });

  it("a migration that stops mid-way names the checkpoint, and --resume copies the rest, every job once", async () => {
    const { args, adapters, stopped } = await stoppedAtSecondPage("flaky");
    expect(stopped).toBeInstanceOf(MigrateError);
    expect((stopped as Error).message).toMatch(
      /stopped after 2 job\(s\): connection reset; run the same command with --resume to continue from .*flaky\.checkpoint\.json$/,
    );
    expect(rowsOf("flaky.sqlite", QUEUE)).toHaveLength(2);

    // The checkpoint carries the checksums of the pages it counts, which the resumed run goes on summing.
    const saved = JSON.parse(readFileSync(checkpointIn("flaky"), "utf8")).queues[QUEUE];
    expect(saved.checksums).toMatchObject({ source: { waiting: { jobs: 2 } }, target: { waiting: { jobs: 2 } }, exact: true });

    const { io, output } = capture();
    await runCli(["migrate", ...args, "--resume"], io, adapters);
    const resumed = JSON.parse(output.out).queues[0];
    expect(resumed).toMatchObject({ read: 5, imported: 5, skipped: 0, missing: [], verification: { equal: true, readAgain: false } });
    expect(resumed.verification.states.waiting.target.jobs).toBe(5);
    expect(rowsOf("flaky.sqlite", QUEUE).map((row) => row.name)).toEqual(["invoice-1", "invoice-2", "invoice-3", "invoice-4", "invoice-5"]);
  });

  it("a checkpoint written without checksums is resumed, and the verification then reads both queues", async () => {
    const { args, adapters, stopped } = await stoppedAtSecondPage("older");
    expect(stopped).toBeInstanceOf(MigrateError);
    // As a checkpoint of an earlier version: no checksums for the pages it counts.
    const checkpoint = JSON.parse(readFileSync(checkpointIn("older"), "utf8"));
    checkpoint.queues[QUEUE].checksums = undefined;
    writeFileSync(checkpointIn("older"), JSON.stringify(checkpoint));

    const { io, output } = capture();
    await runCli(["migrate", ...args, "--resume"], io, adapters);
    const resumed = JSON.parse(output.out).queues[0];
    expect(resumed.verification).toMatchObject({ equal: true, readAgain: true });
    expect(resumed.verification.states.waiting).toMatchObject({ source: { jobs: 5 }, target: { jobs: 5 } });
  });

  it("--mode move --wait-active moves a job that was active once its worker finishes it; one still active at the deadline stays", async () => {
    const moving = createWorkerQueueBackend({ url: sqliteUrl("busy.sqlite") });
    await moving.ready();
    try {
      const queue = "busy";
      await moving.enqueueBulk(queue, [{ name: "finishes" }, { name: "keeps-running" }, { name: "idle-1" }, { name: "idle-2" }]);
      const [finishes] = await moving.reserve(queue, { worker: "legacy" });
      const [keepsRunning] = await moving.reserve(queue, { worker: "legacy" });
      const args = ["--from", sqliteUrl("busy.sqlite"), "--to", sqliteUrl("calm.sqlite"), "--queue", queue, "--mode", "move"];
      const { io, output } = capture();
      const run = runCli(["migrate", ...args, "--wait-active", "2", "--checkpoint", checkpointIn("busy")], io);
      // The idle jobs are moved first; the worker finishes its job while the command waits.
      const moved = () => {
        try {
          return rowsOf("calm.sqlite", queue).length;
        } catch {
          return 0; // the target file or its table is not there yet
        }
      };
      await until(() => moved() === 2, "the idle jobs to move");
      await moving.complete(queue, finishes!.id, { worker: "legacy", result: { ok: true } });
      await run;
      expect(JSON.parse(output.out).queues[0]).toMatchObject({ read: 4, removed: 3, leftActive: 1, missing: [], doubled: [] });
      expect(rowsOf("calm.sqlite", queue).map((row) => [row.name, row.status])).toEqual([
        ["idle-1", "pending"],
        ["idle-2", "pending"],
        ["finishes", "complete"],
      ]);
      expect(rowsOf("busy.sqlite", queue).map((row) => row.name)).toEqual(["keeps-running"]);
      expect((await moving.get(queue, keepsRunning!.id))?.lease?.worker).toBe("legacy");
    } finally {
      await moving.close();
    }
  });

  it("--wait-active is refused without --mode move, and with a wait that is not a number of seconds", async () => {
    const args = ["--from", sqliteUrl("old.sqlite"), "--to", sqliteUrl("never.sqlite"), "--queue", QUEUE];
    await expect(runCli(["migrate", ...args, "--wait-active", "5"], capture().io)).rejects.toThrow(/goes with --mode move/);
    await expect(runCli(["migrate", ...args, "--mode", "move", "--wait-active", "soon"], capture().io)).rejects.toThrow(/takes seconds/);
    expect(existsSync(join(dir, "never.sqlite"))).toBe(false);
  });

  it("switchyard verify compares by checksum and lists the ids that differ", async () => {
    const config = writeConfig("checked");
    await runCli(
      ["migrate", "-c", config, "--from", "old", "--to", "checked", "--queue", QUEUE, "--checkpoint", checkpointIn("checked")],
      capture().io,
    );
    const equal = capture();
    await runCli(["verify", "-c", config, "--from", "old", "--to", "checked", "--queue", QUEUE], equal.io);
    expect(JSON.parse(equal.output.out).queues[0]).toMatchObject({ queue: QUEUE, equal: true, differing: [] });

    const target = createWorkerQueueBackend({ url: sqliteUrl("checked.sqlite") });
    await target.ready();
    const [job] = await target.reserve(QUEUE, { worker: "w" });
    await target.complete(QUEUE, job!.id, { worker: "w" });
    await target.close();
    const { io, output } = capture();
    await expect(runCli(["verify", "-c", config, "--from", "old", "--to", "checked", "--queue", QUEUE], io)).rejects.toThrow(
      new RegExp(`queue "invoices": these jobs differ or are in one store only: ${job!.id}$`),
    );
    expect(JSON.parse(output.out).queues[0]).toMatchObject({
      equal: false,
      states: { completed: { source: { jobs: 0 }, target: { jobs: 1 } } },
    });
  });

  it("the switchyard binary prints only the report on stdout and exits 0", async () => {
    const run = await runBin([
      "migrate",
      "-c",
      writeConfig("bin"),
      "--from",
      "old",
      "--to",
      "bin",
      "--queue",
      QUEUE,
      "--checkpoint",
      checkpointIn("bin"),
    ]);
    expect(run.code, run.err).toBe(0);
    expect(JSON.parse(run.out).queues[0]).toMatchObject({ read: 5, imported: 5, missing: [] });
    expect(progressLines(run.err).at(-1)).toMatchObject({ queue: QUEUE, read: 5, imported: 5 });
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
