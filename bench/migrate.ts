/**
 * `npm run bench -- migrate` (scripts/bench.mjs starts the throwaway servers): jobs per second of
 * `migrateQueue` (export a page, import it, verify it in the target) between pairs of stores, beside
 * the floors measured in the same run: reading the source alone, page by page, and (glide-mq into
 * qless, the issue's Redis-to-Redis pair) a bare pipelined copy that checks nothing (raw-copy.ts). Peak RSS of the process
 * is printed too, and the CPU time per job of this process and of the Redis server (both stores'
 * databases live on it), which a busy shared machine skews far less than jobs per second. BENCH_MIGRATE_JOBS jobs (default 100,000), pages of 1,000. Never part of `npm test`.
 * `npm run bench -- migrate --million`: the issue's targets, 1,000,000 jobs from glide-mq into qless
 * (>= 50,000 jobs/s) and into PostgreSQL (>= 20,000 jobs/s), and out of qless, whose export pages
 * through a snapshot of the queue's jids (RSS under 300 MB whatever the size).
 * Each pair is then migrated again, into another queue of the target, by `switchyard migrate` in a
 * process of its own, as a user runs it (the installed command, built first by turbo; progress,
 * checkpoint file and the closing verification included): its wall time and its peak RSS (VmHWM),
 * which the seeding above does not inflate.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Backend, type Job, forEachPage, migrateQueue } from "@switchyard/core";
import { Redis } from "ioredis";
import { type BackendSpecInput, type StoreName, openStore } from "../test/matrix-backends.js";
import { jobRecord } from "../test/support/job-record.js";
import { serviceUrl } from "../test/support/services.js";
import { redisCpuMicros } from "./harness.js";
import { rawCopyGlideToQless } from "./raw-copy.js";

const MILLION = process.argv.includes("--million");
const JOBS = Number(process.env.BENCH_MIGRATE_JOBS ?? (MILLION ? 1_000_000 : 100_000));
const PAGE = 1_000;
/** The pairs the migration issue measured before: SQLite into glide-mq, qless and PostgreSQL, glide-mq into qless. */
const PAIRS: Array<[StoreName, StoreName]> = [
  ["sqlite", "glidemq"],
  ["sqlite", "qless"],
  ["glidemq", "qless"],
  ["sqlite", "postgres"],
];
/** The pairs of the issue's targets at a million jobs. */
const MILLION_PAIRS: Array<[StoreName, StoreName]> = [
  ["glidemq", "qless"],
  ["glidemq", "postgres"],
  ["sqlite", "postgres"],
  ["qless", "glidemq"],
];
const REDIS_DB = { source: 12, target: 13 };

/** A waiting job as another system would export it. */
function job(i: number, now: number): Job {
  return jobRecord({
    id: `m${i}`,
    queue: "q",
    name: "migrate-me",
    data: { n: i, payload: "x".repeat(64) },
    maxAttempts: 3,
    createdAt: now - (JOBS - i),
  });
}

async function seed(backend: Backend, queue: string): Promise<void> {
  const now = Date.now();
  for (let i = 0; i < JOBS; i += PAGE) {
    await backend.import(
      queue,
      Array.from({ length: Math.min(PAGE, JOBS - i) }, (_, j) => job(i + j, now)),
    );
  }
}

async function readAll(backend: Backend, queue: string): Promise<number> {
  let read = 0;
  await forEachPage(
    backend,
    queue,
    (jobs) => {
      read += jobs.length;
    },
    PAGE,
  );
  return read;
}

const rate = (jobs: number, ms: number) => Math.round((jobs / ms) * 1000);

/**
 * CPU seconds the Redis server has used (INFO cpu, user + system). Beside this process's own CPU
 * time, it gives the cost per job, which other work on a shared machine inflates far less than the
 * wall-clock rate.
 */
async function redisCpuSeconds(): Promise<number> {
  const redis = new Redis(serviceUrl("redis"));
  try {
    return (await redisCpuMicros(redis)) / 1e6;
  } finally {
    redis.disconnect();
  }
}

const redisDbUrl = (db: number) => `${serviceUrl("redis").replace(/\/\d*$/, "")}/${db}`;

async function flushRedis(dbs: number[] = Object.values(REDIS_DB)): Promise<void> {
  for (const db of dbs) {
    const redis = new Redis(redisDbUrl(db));
    await redis.flushdb();
    redis.disconnect();
  }
}

/** The installed command (apps/gateway/bin), which runs the built gateway. */
const SWITCHYARD_BIN = fileURLToPath(new URL("../apps/gateway/bin/switchyard.mjs", import.meta.url));

/** Builds what the installed command runs (turbo replays it when the sources did not change). */
function buildCommand(): void {
  const built = spawnSync("npx", ["turbo", "run", "build", "--filter=@switchyard/gateway...", "--output-logs=errors-only"], {
    stdio: "inherit",
  });
  if (built.status !== 0) throw new Error("the build of the switchyard command failed");
}

/**
 * `switchyard migrate` of `queue` from one spec into `targetQueue` of the other, in a child process:
 * its wall time and peak RSS in MB (the kernel's VmHWM, read while it runs: it is gone at exit).
 */
async function migrateByCli(from: BackendSpecInput, to: BackendSpecInput, queue: string, targetQueue: string) {
  const dir = mkdtempSync(join(tmpdir(), "switchyard-bench-migrate-"));
  const config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({ backends: { source: from, target: to }, routes: [{ pattern: "*", backend: "source" }] }));
  const args = ["--config", config, "--from", "source", "--to", "target", "--queue", queue, "--target-queue", targetQueue];
  args.push("--checkpoint", join(dir, "checkpoint.json"));
  const started = performance.now();
  const child = spawn(process.execPath, [SWITCHYARD_BIN, "migrate", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let peakKb = 0;
  const sample = setInterval(() => {
    try {
      const hwm = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1];
      peakKb = Math.max(peakKb, Number(hwm ?? 0));
    } catch {
      // exited between two samples
    }
  }, 100);
  let stderr = "";
  child.stdout.resume();
  child.stderr.on("data", (chunk) => {
    stderr = (stderr + chunk).slice(-2000);
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  clearInterval(sample);
  rmSync(dir, { recursive: true, force: true });
  if (code !== 0) throw new Error(`switchyard migrate exited ${code}: ${stderr}`);
  return { ms: performance.now() - started, peakRssMb: Math.round(peakKb / 1024) };
}

/** The bare copy (raw-copy.ts) of the queue into an emptied target database: jobs per second. */
async function timedRawCopy(queue: string): Promise<number> {
  await flushRedis([REDIS_DB.target]);
  const started = performance.now();
  const copied = await rawCopyGlideToQless(redisDbUrl(REDIS_DB.source), redisDbUrl(REDIS_DB.target), queue);
  if (copied !== JOBS) throw new Error(`the bare copy copied ${copied} of ${JOBS} jobs`);
  return rate(JOBS, performance.now() - started);
}

async function benchPair(from: StoreName, to: StoreName) {
  const source = openStore(from, REDIS_DB.source);
  const target = openStore(to, REDIS_DB.target);
  const [a, b] = [await source.openBackend(), await target.openBackend()];
  const queue = `mig-${Date.now().toString(36)}`;
  try {
    await seed(a, queue);
    let t0 = performance.now();
    const read = await readAll(a, queue);
    const readMs = performance.now() - t0;
    const [cpu0, redis0] = [process.cpuUsage(), await redisCpuSeconds()];
    t0 = performance.now();
    const report = await migrateQueue({ from: a, to: b, queue, batchSize: PAGE });
    const migrateMs = performance.now() - t0;
    const [cpu, redisCpu] = [process.cpuUsage(cpu0), (await redisCpuSeconds()) - redis0];
    if (read !== JOBS || report.imported !== JOBS || report.missing.length > 0) {
      throw new Error(`${from} -> ${to}: read ${read}, imported ${report.imported}, missing ${report.missing.length} of ${JOBS}`);
    }
    // qless's jids are global: the command's copy would move each job out of the first copy's queue
    // (more work than a copy), so a Redis target is emptied first (its database holds only that copy).
    if (to === "qless" || to === "glidemq") await flushRedis([REDIS_DB.target]);
    const cli = await migrateByCli(source.spec, target.spec, queue, target.track(`${queue}-cli`));
    const rawCopyPerSecond = from === "glidemq" && to === "qless" ? await timedRawCopy(queue) : null;
    return {
      pair: `${from} -> ${to}`,
      jobs: JOBS,
      seconds: +(migrateMs / 1000).toFixed(1),
      jobsPerSecond: rate(JOBS, migrateMs),
      readOnlyPerSecond: rate(JOBS, readMs),
      ofReadOnly: +(readMs / migrateMs).toFixed(2),
      nodeCpuUsPerJob: +((cpu.user + cpu.system) / JOBS).toFixed(1),
      redisCpuUsPerJob: +((redisCpu * 1e6) / JOBS).toFixed(1),
      peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
      rawCopyPerSecond,
      ofRawCopy: rawCopyPerSecond ? +(rate(JOBS, migrateMs) / rawCopyPerSecond).toFixed(2) : null,
      cliJobsPerSecond: rate(JOBS, cli.ms),
      cliPeakRssMb: cli.peakRssMb,
    };
  } finally {
    await Promise.all([a.close(), b.close()]);
    await Promise.all([source.dispose(), target.dispose()]).catch(() => undefined);
    await flushRedis();
  }
}

const only = process.argv.slice(2).filter((arg) => arg.includes(">"));
const pairs = only.length > 0 ? only.map((arg) => arg.split(">") as [StoreName, StoreName]) : MILLION ? MILLION_PAIRS : PAIRS;
process.stderr.write(
  `[bench] migrate: ${JOBS} jobs per pair on ${cpus().length} x ${cpus()[0]?.model}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}\n`,
);
buildCommand();
const rows = [];
for (const [from, to] of pairs) {
  const row = await benchPair(from, to);
  process.stderr.write(
    `[bench] ${row.pair}: ${row.jobsPerSecond} jobs/s (read alone ${row.readOnlyPerSecond}/s), CPU per job ${row.nodeCpuUsPerJob} us here and ${row.redisCpuUsPerJob} us in Redis, peak RSS ${row.peakRssMb} MB; switchyard migrate (built) in its own process ${row.cliJobsPerSecond} jobs/s, peak RSS ${row.cliPeakRssMb} MB${row.rawCopyPerSecond ? `; a bare copy ${row.rawCopyPerSecond} jobs/s (migrateQueue at ${row.ofRawCopy}x)` : ""}\n`,
  );
  rows.push(row);
}
console.table(rows);
// Done: at 200,000 jobs and more something the stores opened (not yet found) kept the process alive.
process.exit(0);
