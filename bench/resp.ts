/**
 * `npm run bench -- resp` (scripts/bench.mjs starts the throwaway servers): a qless client's cycle
 * (put, pop, complete: three EVALSHA of qless's script) through the RESP door, onto SQLite and onto
 * a qless-redis store, beside the same client on Redis itself running the same script. Rounds are
 * interleaved; medians of jobs per second. Never part of `npm test`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { type RunningServer, startServer } from "@switchyard/gateway";
import { qlessScript } from "@switchyard/qless-redis";
import { Redis } from "ioredis";
import { benchRedisUrl } from "./harness.js";

const JOBS = Number(process.env.BENCH_RESP_JOBS ?? 2_000);
const ROUNDS = 3;
const CONCURRENCY = [1, 10];
const REDIS_URL = benchRedisUrl();

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

/** `concurrency` clients each putting, popping and completing their share of JOBS; jobs per second. */
async function cycle(port: number | string, concurrency: number, round: string): Promise<number> {
  const clients = Array.from({ length: concurrency }, () =>
    typeof port === "number" ? new Redis({ port, host: "127.0.0.1" }) : new Redis(port),
  );
  const { sha, source } = qlessScript();
  await Promise.all(clients.map((client) => client.script("LOAD", source)));
  const now = () => String(Date.now() / 1000);
  const started = performance.now();
  await Promise.all(
    clients.map(async (client, c) => {
      const queue = `bench-${round}-${c}`;
      for (let i = 0; i < JOBS / concurrency; i++) {
        const jid = `${round}-${c}-${i}`;
        await client.evalsha(sha, 0, "put", now(), "bench", queue, jid, "Bench", '{"n":1}', 0);
        await client.evalsha(sha, 0, "pop", now(), queue, "bench-worker", 1);
        await client.evalsha(sha, 0, "complete", now(), jid, "bench-worker", queue, "{}");
      }
    }),
  );
  const rate = JOBS / ((performance.now() - started) / 1000);
  for (const client of clients) client.disconnect();
  return rate;
}

const dir = mkdtempSync(join(tmpdir(), "switchyard-bench-resp-"));
const gateway = (backend: { type: string; url: string }) =>
  startServer({ config: { backends: { main: backend }, doors: { resp: { port: 0 } } }, port: 0, host: "127.0.0.1", env: {} });
const targets: Array<{ name: string; server?: RunningServer; url?: string }> = [
  { name: "Redis itself (baseline)", url: REDIS_URL },
  { name: "RESP door -> qless-redis", server: await gateway({ type: "qless-redis", url: REDIS_URL }) },
  { name: "RESP door -> SQLite", server: await gateway({ type: "workerqueue-sql", url: `sqlite:${join(dir, "bench.sqlite")}` }) },
];
const flusher = new Redis(REDIS_URL);
await flusher.flushdb();
// A client left connected would keep this process alive after the table is printed.
flusher.disconnect();

console.log(`machine: ${cpus().length} x ${cpus()[0]?.model}; ${JOBS} jobs per run, ${ROUNDS} interleaved rounds, medians`);
for (const concurrency of CONCURRENCY) {
  const rates = new Map<string, number[]>(targets.map((target) => [target.name, []]));
  for (let round = 0; round < ROUNDS; round++)
    for (const target of targets)
      rates
        .get(target.name)
        ?.push(
          await cycle(target.server?.respPort ?? (target.url as string), concurrency, `c${concurrency}r${round}${target.name.length}`),
        );
  const baseline = median(rates.get(targets[0]?.name as string) ?? []);
  for (const [name, values] of rates)
    console.log(
      `c=${concurrency}  ${name.padEnd(26)} ${Math.round(median(values)).toString().padStart(7)} jobs/s  (${(median(values) / baseline).toFixed(2)}x)`,
    );
}
await Promise.all(targets.map((target) => target.server?.close()));
rmSync(dir, { recursive: true, force: true });
