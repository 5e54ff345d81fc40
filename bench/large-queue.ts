/**
 * `npm run bench -- large-queue [postgres|mysql|sqlite|cloudq]`: the gateway on a store holding one
 * large queue (BENCH_LARGE_JOBS waiting jobs, default 1,000,000), read as an open dashboard reads a
 * busy queue: the overview and `/metrics` every 15 s, and the queue's own summary every 300 ms (the
 * dashboard reads a queue again 300 ms after an event touched it; no job moves here, the reads are
 * what is measured), for BENCH_LARGE_SECONDS (default 60). A SQL store counts a queue by reading its
 * rows (FerretDB reads its documents), so what it costs is the store's CPU in that time and how long
 * each request took. Never part of `npm test`.
 */
import { readFileSync, readdirSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { basename } from "node:path";
import { type StoreName, openStore } from "../test/matrix-backends.js";
import { type ServiceName, serviceUrl } from "../test/support/services.js";
import { processCpuMicros, startGateway } from "./harness.js";

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

const serverPids = (SERVERS[STORE] ?? []).flatMap(([program, service]) => pidsOf(program, new URL(serviceUrl(service)).port));
const storeCpuMicros = () => serverPids.reduce((sum, pid) => sum + treeCpuMicros(pid), 0);
const gateway = await startGateway(store.spec);

async function timed(path: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(new URL(path, gateway.url));
  await response.text();
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return performance.now() - started;
}

const [store0, gateway0, started] = [storeCpuMicros(), processCpuMicros(gateway.pid), Date.now()];
const overviews: number[] = [];
const summaries: number[] = [];
const reads: Promise<void>[] = [];
// The dashboard does not wait for one read to end before the next: neither does this.
const touched = setInterval(
  () => reads.push(timed(`/v1/queues/${QUEUE}/overview`).then((ms) => void summaries.push(ms))),
  TOUCHED_EVERY_MS,
);
for (let at = 0; at < SECONDS * 1000; at += OVERVIEW_EVERY_MS) {
  const wait = started + at - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  overviews.push(await timed("/metrics"), await timed("/v1/overview"));
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

/** The main process of a server: the program `name` (a path, or a name with a version after it) given the port. */
function pidsOf(name: string, port: string): number[] {
  return processes()
    .filter(({ cmdline }) => basename(cmdline.split(" ")[0] ?? "").startsWith(name) && cmdline.includes(port))
    .map(({ pid }) => pid);
}

function processes(): Array<{ pid: number; ppid: number; cmdline: string }> {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((entry) => {
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
        return [
          { pid: Number(entry), ppid: Number(stat[1]), cmdline: readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ") },
        ];
      } catch {
        return []; // gone meanwhile
      }
    });
}

/**
 * CPU time of a server and its children, in µs: PostgreSQL works in a process per connection, and
 * the main process's own figures include its children that have ended (cutime, cstime).
 */
function treeCpuMicros(root: number): number {
  const ticks = (pid: number, withEnded: boolean) => {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    const own = Number(fields[11]) + Number(fields[12]);
    return withEnded ? own + Number(fields[13]) + Number(fields[14]) : own;
  };
  const children = processes().filter((process) => process.ppid === root);
  let sum = ticks(root, true);
  for (const child of children) {
    try {
      sum += ticks(child.pid, false);
    } catch {
      // ended between the listing and the read: its time is in the root's figures by now
    }
  }
  return sum * 10_000;
}
