/**
 * `npm run bench -- large-keyspace`: the gateway on a glide-mq store whose Redis holds many job hashes
 * (BENCH_KEYSPACE_JOBS, default 1,000,000, in one queue), read as a dashboard and a Prometheus
 * scraper read it: `/metrics` and `/v1/overview` every 15 s for BENCH_KEYSPACE_SECONDS (default 60).
 * glide-mq keeps no list of its queues nor of its flow parents, so naming them walks the whole
 * keyspace: what those walks cost is Redis's CPU in that time, its SCAN commands, and how long each
 * request took. Never part of `npm test`.
 */
import { cpus, loadavg } from "node:os";
import { Redis } from "ioredis";
import { benchRedisUrl, processCpuMicros, redisCpuMicros, startGateway, timedGet } from "./harness.js";

const JOBS = Number(process.env.BENCH_KEYSPACE_JOBS ?? 1_000_000);
const SECONDS = Number(process.env.BENCH_KEYSPACE_SECONDS ?? 60);
const READ_EVERY_MS = 15_000;
const redisUrl = benchRedisUrl();

const admin = new Redis(redisUrl);
await admin.flushdb();
// Job hashes as glide-mq leaves completed jobs it keeps, written by Redis itself 100,000 a call.
const FILL = "for i = ARGV[1], ARGV[2] do redis.call('HSET', KEYS[1] .. i, 'name', 'kept', 'state', 'completed', 'data', '{}') end";
for (let from = 1; from <= JOBS; from += 100_000) await admin.eval(FILL, 1, "glide:{archive}:job:", from, Math.min(JOBS, from + 99_999));
await admin.xadd("glide:{archive}:events", "*", "event", "added", "jobId", "1");

const gateway = await startGateway({ type: "glidemq-valkey", url: redisUrl });
const scans = async () => Number(/cmdstat_scan:calls=(\d+)/.exec(await admin.info("commandstats"))?.[1] ?? 0);
const timed = async (path: string) => Math.round(await timedGet(gateway, path));

const [redis0, scans0, gateway0, started] = [await redisCpuMicros(admin), await scans(), processCpuMicros(gateway.pid), Date.now()];
const reads: Array<{ at: number; metricsMs: number; overviewMs: number }> = [];
for (let at = 0; at < SECONDS * 1000; at += READ_EVERY_MS) {
  const wait = started + at - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  reads.push({ at: at / 1000, metricsMs: await timed("/metrics"), overviewMs: await timed("/v1/overview") });
}
const wait = started + SECONDS * 1000 - Date.now();
if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
const redisMs = Math.round(((await redisCpuMicros(admin)) - redis0) / 1000);
const scanCalls = (await scans()) - scans0;
const gatewayMs = Math.round((processCpuMicros(gateway.pid) - gateway0) / 1000);
gateway.stop();
await admin.flushdb();
admin.disconnect();

const [model] = cpus();
console.log(
  `\n${cpus().length} x ${model?.model ?? "CPU"}, load ${loadavg()[0]?.toFixed(2)}; ${JOBS.toLocaleString("en")} glide-mq job hashes`,
);
console.log(
  `In ${SECONDS} s: Redis CPU ${redisMs.toLocaleString("en")} ms, ${scanCalls.toLocaleString("en")} SCANs, gateway CPU ${gatewayMs.toLocaleString("en")} ms`,
);
console.log("| at s | /metrics ms | /v1/overview ms |\n| ---: | ---: | ---: |");
for (const read of reads) console.log(`| ${read.at} | ${read.metricsMs} | ${read.overviewMs} |`);
process.exit(0);
