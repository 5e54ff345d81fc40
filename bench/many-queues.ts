/**
 * `npm run bench -- many-queues`: the gateway on a glide-mq store that holds many queues
 * (BENCH_OTHER_QUEUES, default 300, one job each), answering `/v1` enqueues and `/qless` puts at 50
 * in flight into one queue: requests per second, and the CPU each request cost the gateway process
 * (/proc) and Redis (INFO cpu), which a busy shared machine skews far less than the rate. The
 * store's job event feed reads every queue's events stream, and a qless put looks for its jid in
 * every queue, so both grow with the number of queues. BENCH_ROUNDS rounds (default 2) of
 * BENCH_REQUESTS requests (default 4,000) each, after 1,000 of each kind. Never part of `npm test`.
 */
import { cpus, loadavg } from "node:os";
import { Redis } from "ioredis";
import { http, benchRedisUrl, processCpuMicros, redisCpuMicros, startGateway } from "./harness.js";

const OTHER_QUEUES = Number(process.env.BENCH_OTHER_QUEUES ?? 300);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 4_000);
const IN_FLIGHT = 50;
const redisUrl = benchRedisUrl();

const admin = new Redis(redisUrl);
await admin.flushdb();
const gateway = await startGateway({ type: "glidemq-valkey", url: redisUrl });
const { pid } = gateway;

const queue = `busy-${Date.now().toString(36)}`;
type Kind = "/v1 enqueue" | "/qless put";
const requestOf: Record<Kind, (i: number) => [string, unknown]> = {
  "/v1 enqueue": (i) => [`/v1/queues/${queue}-v1/jobs`, { name: "bench", data: { n: i } }],
  // qless jids are global: each put a new one.
  "/qless put": (i) => ["/qless/put", { args: ["bench", `${queue}-qless`, `jid-${i}`, "bench", JSON.stringify({ n: i }), 0] }],
};
let sent = 0;
async function drive(kind: Kind, n: number): Promise<number> {
  let left = n;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (left-- > 0) await http(gateway, "POST", ...requestOf[kind](sent++));
    }),
  );
  return (n / (performance.now() - started)) * 1000;
}

for (let k = 0; k < OTHER_QUEUES; k++) await http(gateway, "POST", `/v1/queues/other-${k}/jobs`, { name: "idle", data: {} });
for (const kind of Object.keys(requestOf) as Kind[]) await drive(kind, 1_000);
const rows: Array<{ kind: Kind; rate: number; gatewayUs: number; redisUs: number }> = [];
for (let round = 0; round < ROUNDS; round++) {
  for (const kind of Object.keys(requestOf) as Kind[]) {
    const [gateway0, redis0] = [processCpuMicros(pid), await redisCpuMicros(admin)];
    const rate = await drive(kind, REQUESTS);
    rows.push({
      kind,
      rate: Math.round(rate),
      gatewayUs: Math.round((processCpuMicros(pid) - gateway0) / REQUESTS),
      redisUs: Math.round(((await redisCpuMicros(admin)) - redis0) / REQUESTS),
    });
  }
}
gateway.stop();
await admin.flushdb();
admin.disconnect();

const [model] = cpus();
console.log(
  `\n${cpus().length} x ${model?.model ?? "CPU"}, load ${loadavg()[0]?.toFixed(2)}; glide-mq store with ${OTHER_QUEUES} other queues`,
);
console.log("| round | requests | per second | gateway CPU per request | Redis CPU per request |");
console.log("| ---: | --- | ---: | ---: | ---: |");
rows.forEach((row, i) => console.log(`| ${Math.floor(i / 2) + 1} | ${row.kind} | ${row.rate} | ${row.gatewayUs} µs | ${row.redisUs} µs |`));
process.exit(0);
