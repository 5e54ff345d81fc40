/**
 * glide-mq 0.15.4's own Queue and Worker through the RESP door, beside the same client on Redis
 * itself. Run on demand (glide-mq is not installed here; never part of `npm test`):
 *
 *   GLIDEMQ_PATH=/tmp/glide-build-sy npx tsx test/resp-glidemq-bench.ts
 *
 * Each round adds JOBS jobs with Queue.addBulk (100 a call) on one queue, and JOBS jobs with Queue.add
 * (10 in flight) on another, which one Worker (concurrency 10) then processes, on: a redis-server of the bench's own (the baseline, since glide-mq cannot choose a
 * database on the shared one), the door onto a glidemq-valkey store on that same server (passed
 * through), onto SQLite and onto PostgreSQL. Rounds are interleaved; medians of jobs per second.
 */
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { cpus, loadavg } from "node:os";
import { type RunningServer, startServer } from "@switchyard/gateway";
import { Redis } from "ioredis";
import { openStore } from "./matrix-backends.js";

const glidePath = process.env.GLIDEMQ_PATH;
if (!glidePath) throw new Error("set GLIDEMQ_PATH to a built glide-mq (see the header of this file)");
// biome-ignore lint/suspicious/noExplicitAny: glide-mq is loaded at run time from a path, untyped
const glide = createRequire(import.meta.url)(glidePath) as any;
const JOBS = Number(process.env.BENCH_GLIDEMQ_JOBS ?? 500);
const ROUNDS = 3;
const IN_FLIGHT = 10;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** Adds JOBS jobs with addBulk (100 a call) on `bulkQueue`, then adds and processes JOBS jobs on `queueName`; jobs per second of each. */
async function round(port: number, queueName: string, bulkQueue: string): Promise<{ add: number; addBulk: number; process: number }> {
  const connection = { addresses: [{ host: "127.0.0.1", port }] };
  const bulk = new glide.Queue(bulkQueue, { connection });
  const bulkStarted = performance.now();
  for (let i = 0; i < JOBS; i += 100) await bulk.addBulk(Array.from({ length: 100 }, (_, n) => ({ name: "bench", data: { n: i + n } })));
  const addBulk = JOBS / ((performance.now() - bulkStarted) / 1000);
  await bulk.close();
  const queue = new glide.Queue(queueName, { connection });
  let next = 0;
  const addStarted = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < JOBS) await queue.add("bench", { n: next++ });
    }),
  );
  const add = JOBS / ((performance.now() - addStarted) / 1000);
  let done = 0;
  const processStarted = performance.now();
  const worker = new glide.Worker(queueName, async () => "ok", { connection, concurrency: IN_FLIGHT, blockTimeout: 100 });
  worker.on("completed", () => done++);
  worker.on("error", () => undefined);
  while (done < JOBS) await sleep(5);
  const processRate = JOBS / ((performance.now() - processStarted) / 1000);
  await worker.close();
  await queue.close();
  return { add, addBulk, process: processRate };
}

const redisPort = await freePort();
const redisServer = spawn("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
  stdio: "ignore",
});
const redis = new Redis({ port: redisPort, lazyConnect: true, retryStrategy: () => 50 });
redis.on("error", () => undefined);
while ((await redis.ping().catch(() => "")) !== "PONG") await sleep(50);

const door = (backend: { type: string; url: string; options?: Record<string, unknown> }) =>
  startServer({ config: { backends: { main: backend }, doors: { resp: { port: 0 } } }, port: 0, host: "127.0.0.1", env: {} });
const sqlite = openStore("sqlite");
const postgres = openStore("postgres");
const targets: Array<{ name: string; port: number; server?: RunningServer }> = [{ name: "Redis itself (baseline)", port: redisPort }];
for (const [name, spec] of [
  ["door -> glidemq-valkey", { type: "glidemq-valkey", url: `redis://127.0.0.1:${redisPort}` }],
  ["door -> SQLite", sqlite.spec],
  ["door -> PostgreSQL", postgres.spec],
] as const) {
  const server = await door(spec);
  targets.push({ name, port: server.respPort as number, server });
}

console.log(
  `machine: ${cpus().length} x ${cpus()[0]?.model}; load average ${loadavg()
    .map((n) => n.toFixed(2))
    .join(" ")}`,
);
console.log(`${JOBS} jobs per round, ${IN_FLIGHT} adds in flight, Worker concurrency ${IN_FLIGHT}, ${ROUNDS} interleaved rounds, medians`);
const rates = new Map(targets.map((target) => [target.name, { add: [] as number[], addBulk: [] as number[], process: [] as number[] }]));
for (let r = 0; r < ROUNDS; r++)
  for (const target of targets) {
    console.log(`round ${r + 1}: ${target.name}`);
    const {
      add,
      addBulk,
      process: processed,
    } = await round(target.port, `bench-${r}-${target.name.length}`, `bulk-${r}-${target.name.length}`);
    rates.get(target.name)?.add.push(add);
    rates.get(target.name)?.addBulk.push(addBulk);
    rates.get(target.name)?.process.push(processed);
  }
const baseline = rates.get(targets[0]?.name as string) as { add: number[]; addBulk: number[]; process: number[] };
const figure = (values: number[], base: number[]) =>
  `${Math.round(median(values)).toString().padStart(6)} jobs/s (${(median(values) / median(base)).toFixed(2)}x)`;
for (const [name, { add, addBulk, process: processed }] of rates)
  console.log(
    `${name.padEnd(26)} add ${figure(add, baseline.add)}   addBulk ${figure(addBulk, baseline.addBulk)}` +
      `   process ${figure(processed, baseline.process)}`,
  );
console.log(
  `load average after: ${loadavg()
    .map((n) => n.toFixed(2))
    .join(" ")}`,
);
await Promise.all(targets.map((target) => target.server?.close()));
await Promise.all([sqlite.dispose(), postgres.dispose()]);
redis.disconnect();
redisServer.kill();
process.exit(0);
