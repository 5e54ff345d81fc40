/**
 * `npm run bench -- large-queue [postgres|mysql|sqlite|cloudq]`: the gateway on a store holding one
 * large queue (BENCH_LARGE_JOBS waiting jobs, default 1,000,000), read as an open dashboard reads a
 * busy queue: the overview and `/metrics` every 15 s, and the queue's own summary every 300 ms (the
 * dashboard reads a queue again 300 ms after an event touched it; no job moves here, the reads are
 * what is measured), for BENCH_LARGE_SECONDS (default 60). A SQL store counts a queue by reading its
 * rows (FerretDB reads its documents), so what it costs is the store's CPU in that time and how long
 * each request took. Never part of `npm test`.
 */
import { cpus, loadavg } from "node:os";
import { type StoreName, openStore } from "../test/matrix-backends.js";
import { type ServiceName, serviceUrl } from "../test/support/services.js";
import { processCpuMicros, serverPids, startGateway, timedGet, treeCpuMicros } from "./harness.js";

const STORE = (process.argv[2] ?? "postgres") as StoreName;
const JOBS = Number(process.env.BENCH_LARGE_JOBS ?? 1_000_000);
const SECONDS = Number(process.env.BENCH_LARGE_SECONDS ?? 60);
const OVERVIEW_EVERY_MS = 15_000;
const TOUCHED_EVERY_MS = 300;
const QUEUE = "large";
const PAGE = 1_000;
/** Each store's server processes: the program's name and the service whose port its command line names. */
const SERVERS: Partial<Record<StoreName, Array<[program: string, service: ServiceName]>>> = {
  postgres: [["postgres", "postgres"]],
  mysql: [["mariadbd", "mysql"]],
  // FerretDB keeps its documents in PostgreSQL.
  cloudq: [
    ["ferretdb", "mongo"],
    ["postgres", "postgres"],
  ],
};

if (!["postgres", "mysql", "sqlite", "cloudq"].includes(STORE)) throw new Error(`large-queue: no store ${STORE}`);
const store = openStore(STORE);
const backend = await store.openBackend();
const filling = performance.now();
// Several pages in flight, as a migration writes: the fill is not what is measured.
for (let from = 0; from < JOBS; from += PAGE * 4) {
  await Promise.all(
    [0, 1, 2, 3].map(async (k) => {
      const start = from + k * PAGE;
      const size = Math.min(PAGE, JOBS - start);
      if (size > 0)
        await backend.enqueueBulk(
          QUEUE,
          Array.from({ length: size }, (_, i) => ({ name: "kept", data: { n: start + i } })),
        );
    }),
  );
}
const fillSeconds = (performance.now() - filling) / 1000;
await backend.close();

const pids = (SERVERS[STORE] ?? []).flatMap(([program, service]) => serverPids(program, new URL(serviceUrl(service)).port));
const storeCpuMicros = () => pids.reduce((sum, pid) => sum + treeCpuMicros(pid), 0);
const gateway = await startGateway(store.spec);

const [store0, gateway0, started] = [storeCpuMicros(), processCpuMicros(gateway.pid), Date.now()];
const overviews: number[] = [];
const summaries: number[] = [];
const reads: Promise<void>[] = [];
// The dashboard does not wait for one read to end before the next: neither does this.
const touched = setInterval(
  () => reads.push(timedGet(gateway, `/v1/queues/${QUEUE}/overview`).then((ms) => void summaries.push(ms))),
  TOUCHED_EVERY_MS,
);
for (let at = 0; at < SECONDS * 1000; at += OVERVIEW_EVERY_MS) {
  const wait = started + at - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  overviews.push(await timedGet(gateway, "/metrics"), await timedGet(gateway, "/v1/overview"));
}
const wait = started + SECONDS * 1000 - Date.now();
if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
clearInterval(touched);
await Promise.all(reads);
const storeMs = Math.round((storeCpuMicros() - store0) / 1000);
const gatewayMs = Math.round((processCpuMicros(gateway.pid) - gateway0) / 1000);
gateway.stop();
await store.dispose();

const [model] = cpus();
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const ms = (value: number) => `${Math.round(value).toLocaleString("en")} ms`;
console.log(`\n${cpus().length} x ${model?.model ?? "CPU"}, load ${loadavg()[0]?.toFixed(2)}`);
console.log(`${STORE}: ${JOBS.toLocaleString("en")} waiting jobs in one queue, filled in ${fillSeconds.toFixed(1)} s`);
console.log(
  STORE === "sqlite"
    ? `In ${SECONDS} s: gateway CPU ${ms(gatewayMs)}, SQLite's included`
    : `In ${SECONDS} s: the store's CPU ${ms(storeMs)}, gateway CPU ${ms(gatewayMs)}`,
);
console.log(
  `/metrics and /v1/overview (every ${OVERVIEW_EVERY_MS / 1000} s): ${overviews.map((value) => Math.round(value)).join(", ")} ms`,
);
console.log(
  `the queue's summary (every ${TOUCHED_EVERY_MS} ms): ${summaries.length} answered, median ${ms(median(summaries))}, slowest ${ms(Math.max(...summaries))}`,
);
process.exit(0);
