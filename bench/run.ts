/**
 * `npm run bench` (scripts/bench.mjs starts the throwaway servers and runs this): for every store,
 * jobs per second through (a) the adapter's Backend in this process and (b) a gateway process over
 * HTTP (`/v1`, keep-alive), beside baselines measured in the same run: one bare round trip to the
 * same server (Redis PING, SQL `select 1`, Mongo `ping`), the floor of "one round trip per job", and
 * a bare Hono app in its own process answering the same POSTs, the floor of the HTTP path.
 * Every figure is the median of BENCH_RUNS runs (default 3) on a fresh queue; latencies are the
 * medians of each run's p50/p99. Beyond `/v1`: 1,000-job bulks over HTTP, an enqueue
 * through each protocol door, the cycle with complete-and-reserve-next (one call per job), and the
 * latency the gateway adds at a steady 2,000 requests a second (BENCH_PACED_RATE): p50 and p99 of
 * `/v1` enqueues paced at that rate against the bare Hono app's answers paced the same way (the HTTP
 * floor), the two alternated in BENCH_PACED_PAIRS pairs of BENCH_PACED_SECONDS each and the added
 * latency the median of the pairs' differences, beside the same enqueues on the Backend in this
 * process (the store's own share).
 * Never part of `npm test`.
 *
 *   npm run bench                       # every store
 *   npm run bench -- sqlite glidemq     # some of them
 *   npm run bench -- --quick            # one run of fewer jobs per figure (a look, not a measurement)
 *   npm run bench -- --json             # the rows as JSON lines after the table
 */
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { type Backend, type EnqueueInput, type Job, completeAndReserve } from "@switchyard/core";
import { Redis } from "ioredis";
import knexFactory from "knex";
import { MongoClient } from "mongodb";
import { type StoreName, openStore } from "../test/matrix-backends.js";
import { serviceUrl } from "../test/support/services.js";
import { http, startGateway, startProcess } from "./harness.js";

const QUICK = process.argv.includes("--quick");
const JSON_OUTPUT = process.argv.includes("--json");
const RUNS = Number(process.env.BENCH_RUNS ?? (QUICK ? 1 : 3));
const ENQUEUE_JOBS = Number(process.env.BENCH_ENQUEUE_JOBS ?? (QUICK ? 500 : 2000));
/** Requests each HTTP process answers before the first timed one. */
const WARMUP_REQUESTS = Number(process.env.BENCH_WARMUP_REQUESTS ?? 2000);
const CYCLE_JOBS = Number(process.env.BENCH_CYCLE_JOBS ?? (QUICK ? 500 : 2000));
const STORES: StoreName[] = ["sqlite", "postgres", "mysql", "qless", "glidemq", "cloudq"];
/**
 * Jobs per cycle measurement, by store: FerretDB hands out a Cloudq job in tens of milliseconds (a
 * sorted find, then a guarded findOneAndUpdate per claim), so its cycles run on fewer jobs.
 */
const cycleJobs = (name: StoreName, workers: number) =>
  Math.round((workers === 1 ? CYCLE_JOBS / 4 : CYCLE_JOBS) / (name === "cloudq" ? 10 : 1));

/** The Redis database the bench writes to, flushed after each Redis store. */
const REDIS_DB = 14;
/** The steady request rate at which the gateway's added latency is measured, and for how long. */
const PACED_RATE = Number(process.env.BENCH_PACED_RATE ?? 2000);
// Quick: 2,000 requests per paced run, so each p99 still rests on 20 above it.
const PACED_SECONDS = Number(process.env.BENCH_PACED_SECONDS ?? (QUICK ? 1 : 3));
/** Paced runs of the bare app and the gateway, alternated. */
const PACED_PAIRS = Number(process.env.BENCH_PACED_PAIRS ?? (QUICK ? 2 : 7));

/** An enqueue as each protocol door takes it: the path and body of job `i` into queue `q`. */
const DOOR_ENQUEUES: Array<[string, (q: string, i: number) => [string, unknown]]> = [
  ["http /cloudq", (q, i) => [`/cloudq/${q}`, { job: { klass: "bench", args: [i] } }]],
  ["http /glidemq", (q, i) => [`/glidemq/queues/${q}/jobs`, { name: "bench", data: { n: i } }]],
  // qless jids are global to the store: each run's queue name keeps them apart.
  ["http /qless", (q, i) => ["/qless/put", { args: ["bench", q, `${q}-${i}`, "bench", JSON.stringify({ n: i }), 0] }]],
  ["http /workerqueue", (q, i) => ["/workerqueue/jobs", { name: "bench", data: { n: i }, queue: q }]],
];

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))] ?? 0;

/** `n` calls with `inFlight` outstanding at any time; the rate in calls per second and each call's latency in ms. */
async function drive(n: number, inFlight: number, call: (i: number) => Promise<unknown>): Promise<{ rate: number; latencies: number[] }> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < n) {
        const i = next++;
        const t0 = performance.now();
        await call(i);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return { rate: (n / (performance.now() - started)) * 1000, latencies };
}

/**
 * Calls started at a steady `rate` per second for `seconds`, whatever the answers' speed (an open
 * loop, as traffic arrives), each call's latency in ms from its start; the rate reached is returned
 * too, so a run that could not keep the pace shows it.
 */
async function paced(rate: number, seconds: number, call: (i: number) => Promise<unknown>): Promise<{ rate: number; latencies: number[] }> {
  const total = Math.round(rate * seconds);
  const latencies: number[] = [];
  const pending: Array<Promise<unknown>> = [];
  const started = performance.now();
  let sent = 0;
  while (sent < total) {
    // Timers wake about every millisecond: start every call that is due by now, then sleep.
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate) + 1);
    for (; sent < due; sent++) {
      const t0 = performance.now();
      pending.push(call(sent).then(() => latencies.push(performance.now() - t0)));
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await Promise.all(pending);
  return { rate: (total / (performance.now() - started)) * 1000, latencies };
}

/** Workers that reserve one job and complete it until the queue is empty; jobs per second. */
async function cycle(reserve: () => Promise<Job | undefined>, complete: (job: Job) => Promise<unknown>, jobs: number, workers: number) {
  let done = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (;;) {
        const job = await reserve();
        if (!job) return;
        await complete(job);
        done++;
      }
    }),
  );
  if (done !== jobs) throw new Error(`the cycle completed ${done} of ${jobs} jobs`);
  return (jobs / (performance.now() - started)) * 1000;
}

/**
 * Workers that reserve once, then complete each job and take the next in the same call (glide-mq's
 * completeAndFetchNext) until none comes; jobs per second.
 */
async function chainedCycle(
  reserve: () => Promise<Job | undefined>,
  completeAndNext: (job: Job) => Promise<Job | undefined>,
  jobs: number,
  workers: number,
) {
  let done = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let job = await reserve(); job; done++) job = await completeAndNext(job);
    }),
  );
  if (done !== jobs) throw new Error(`the chained cycle completed ${done} of ${jobs} jobs`);
  return (jobs / (performance.now() - started)) * 1000;
}

/**
 * The raw driver baselines of a store, the floor under each adapter figure: one bare round trip
 * (Redis PING, SQL `select 1`, Mongo `ping`), and the least a job needs written with the bare driver:
 * on Redis a hash and a stream entry (one pipelined round trip, or 1,000 jobs in one pipeline), in
 * SQL one row inserted (or 1,000 in one statement), in Mongo one document (or one insertMany).
 */
interface Baseline {
  ping: () => Promise<unknown>;
  insert: (i: number) => Promise<unknown>;
  insertMany: (from: number, count: number) => Promise<unknown>;
  close: () => Promise<void>;
}

async function rawBaseline(name: StoreName): Promise<Baseline> {
  const tag = `raw-${Date.now().toString(36)}`;
  const payload = (i: number) => JSON.stringify({ n: i });
  if (name === "qless" || name === "glidemq" || name === "glidemq-cluster") {
    const redis = new Redis(`${serviceUrl("redis").replace(/\/\d*$/, "")}/${REDIS_DB}`);
    const write = (pipeline: ReturnType<Redis["pipeline"]>, i: number) =>
      pipeline.hset(`${tag}:job:${i}`, "name", "bench", "data", payload(i)).xadd(`${tag}:stream`, "*", "jobId", String(i));
    return {
      ping: () => redis.ping(),
      insert: (i) => write(redis.pipeline(), i).exec(),
      insertMany: (from, count) => {
        const pipeline = redis.pipeline();
        for (let i = from; i < from + count; i++) write(pipeline, i);
        return pipeline.exec();
      },
      close: async () => void redis.disconnect(),
    };
  }
  if (name === "cloudq") {
    const client = await new MongoClient(serviceUrl("mongo")).connect();
    const collection = client.db(`bench_${tag.replace(/-/g, "_")}`).collection("jobs");
    return {
      ping: () => client.db("admin").command({ ping: 1 }),
      insert: (i) => collection.insertOne({ klass: "bench", args: [i] }),
      insertMany: (from, count) => collection.insertMany(Array.from({ length: count }, (_, i) => ({ klass: "bench", args: [from + i] }))),
      close: async () => {
        await collection.db.dropDatabase();
        await client.close();
      },
    };
  }
  const knex =
    name === "sqlite"
      ? knexFactory({ client: "better-sqlite3", connection: { filename: ":memory:" }, useNullAsDefault: true })
      : knexFactory({
          client: name === "postgres" ? "pg" : "mysql2",
          connection: serviceUrl(name === "postgres" ? "postgres" : "mysql"),
          pool: { min: 1, max: 50 },
        });
  const table = tag.replace(/-/g, "_");
  await knex.schema.createTable(table, (t) => {
    t.increments("id");
    t.string("name");
    t.text("data");
  });
  return {
    ping: () => knex.raw("select 1"),
    insert: (i) => knex(table).insert({ name: "bench", data: payload(i) }),
    // One multi-row VALUES statement (knex writes SQLite's as a compound SELECT, which stops at 500 rows).
    insertMany: (from, count) =>
      knex.raw(
        `insert into ${table} (name, data) values ${Array.from({ length: count }, () => "(?, ?)").join(", ")}`,
        Array.from({ length: count }, (_, i) => ["bench", payload(from + i)]).flat(),
      ),
    close: async () => {
      await knex.schema.dropTableIfExists(table);
      await knex.destroy();
    },
  };
}

interface Row {
  store: string;
  path: string;
  measure: string;
  jobsPerSecond: number;
  p50ms?: number;
  p99ms?: number;
  /** The gateway's paced row: p50 and p99 over the bare app's, the median of the pairs' differences. */
  addedMs?: { p50: number; p99: number; pairs: number };
}

interface RunResult {
  rate: number;
  latencies?: number[];
}

/**
 * Drops what a run wrote: the SQL table and the Mongo database go whole; Redis database 14 is the
 * bench's own, flushed (the probes' per-queue clean-up scans every job, too slow after a bench).
 */
async function cleanUp(name: StoreName, store: ReturnType<typeof openStore>): Promise<void> {
  if (name !== "qless" && name !== "glidemq") return store.dispose();
  const redis = new Redis(`${serviceUrl("redis").replace(/\/\d*$/, "")}/${REDIS_DB}`);
  await redis.flushdb();
  redis.disconnect();
}

async function benchStore(name: StoreName): Promise<Row[]> {
  const store = openStore(name, REDIS_DB, { completion: "mark-deleted" });
  const backend: Backend = await store.openBackend();
  const server = await startGateway(store.spec);
  const bare = await startProcess(["--import", "tsx", join(import.meta.dirname, "bare-hono.ts")]);
  const baseline = await rawBaseline(name);
  let seq = 0;
  const queue = () => `bench-${Date.now().toString(36)}-${seq++}`;
  const rows: Row[] = [];
  /** A row from runs: the median rate, and the median over runs of each run's p50 and p99. */
  const record = (path: string, what: string, results: RunResult[]) => {
    const row: Row = { store: name, path, measure: what, jobsPerSecond: Math.round(median(results.map((result) => result.rate))) };
    const timed = results.flatMap((result) => (result.latencies ? [result.latencies] : []));
    if (timed.length > 0) {
      row.p50ms = +median(timed.map((latencies) => percentile(latencies, 0.5))).toFixed(2);
      row.p99ms = +median(timed.map((latencies) => percentile(latencies, 0.99))).toFixed(2);
    }
    rows.push(row);
    process.stderr.write(`[bench] ${name} ${path} ${what}: ${row.jobsPerSecond}/s\n`);
    return row;
  };
  const measure = async (path: string, what: string, run: () => Promise<RunResult>) => {
    const results = [];
    for (let r = 0; r < RUNS; r++) results.push(await run());
    return record(path, what, results);
  };
  const preload = async (q: string, n: number) => {
    for (let i = 0; i < n; i += 1000)
      await backend.enqueueBulk(
        q,
        Array.from({ length: Math.min(1000, n - i) }, (_, j) => ({ name: "w", data: { n: i + j } })),
      );
  };
  const job = (i: number): EnqueueInput => ({ name: "bench", data: { n: i } });
  try {
    // Both processes warm (JIT, connections) before anything is timed: the bare app, measured first,
    // answered its first requests several times slower than later ones, which flattered every ratio to it.
    const warmQueue = queue();
    await drive(WARMUP_REQUESTS, 50, (i) => http(bare, "POST", "/v1/queues/q/jobs", job(i)));
    await drive(WARMUP_REQUESTS, 50, (i) => http(server, "POST", `/v1/queues/${warmQueue}/jobs`, job(i)));
    for (const inFlight of [1, 10, 50]) {
      await measure("baseline", `round trip, ${inFlight} in flight`, () => drive(ENQUEUE_JOBS, inFlight, baseline.ping));
      await measure("baseline", `raw enqueue, ${inFlight} in flight`, () => drive(ENQUEUE_JOBS, inFlight, baseline.insert));
      await measure("backend", `enqueue, ${inFlight} in flight`, () => {
        const q = queue();
        return drive(inFlight === 1 ? ENQUEUE_JOBS / 4 : ENQUEUE_JOBS, inFlight, (i) => backend.enqueue(q, job(i)));
      });
      await measure("http bare hono", `POST, ${inFlight} in flight`, () =>
        drive(inFlight === 1 ? ENQUEUE_JOBS / 4 : ENQUEUE_JOBS, inFlight, (i) => http(bare, "POST", "/v1/queues/q/jobs", job(i))),
      );
      await measure("http /v1", `enqueue, ${inFlight} in flight`, () => {
        const q = queue();
        return drive(inFlight === 1 ? ENQUEUE_JOBS / 4 : ENQUEUE_JOBS, inFlight, (i) =>
          http(server, "POST", `/v1/queues/${q}/jobs`, job(i)),
        );
      });
    }
    await measure("baseline", "raw enqueueBulk, 1000 a call", async () => {
      const started = performance.now();
      for (let i = 0; i < ENQUEUE_JOBS * 2; i += 1000) await baseline.insertMany(i, 1000);
      return { rate: ((ENQUEUE_JOBS * 2) / (performance.now() - started)) * 1000 };
    });
    await measure("backend", "enqueueBulk, 1000 a call", async () => {
      const q = queue();
      const started = performance.now();
      await preload(q, ENQUEUE_JOBS * 2);
      return { rate: ((ENQUEUE_JOBS * 2) / (performance.now() - started)) * 1000 };
    });
    await measure("http /v1", "enqueueBulk, 1000 a call", async () => {
      const q = queue();
      const started = performance.now();
      for (let i = 0; i < ENQUEUE_JOBS * 2; i += 1000)
        await http(server, "POST", `/v1/queues/${q}/jobs/bulk`, { jobs: Array.from({ length: 1000 }, (_, j) => job(i + j)) });
      return { rate: ((ENQUEUE_JOBS * 2) / (performance.now() - started)) * 1000 };
    });
    for (const [path, request] of DOOR_ENQUEUES) {
      // Each door's own code warms first, as the bare app and /v1 did.
      const warmDoor = queue();
      await drive(WARMUP_REQUESTS / 4, 50, (i) => http(server, "POST", ...request(warmDoor, i)));
      await measure(path, "enqueue, 50 in flight", () => {
        const q = queue();
        return drive(ENQUEUE_JOBS, 50, (i) => http(server, "POST", ...request(q, i)));
      });
    }
    for (const workers of [1, 10, 50]) {
      const jobs = cycleJobs(name, workers);
      await measure("backend", `reserve + complete, ${workers} workers`, async () => {
        const q = queue();
        await preload(q, jobs);
        const worker = `w-${seq}`;
        const rate = await cycle(
          async () => (await backend.reserve(q, { worker, count: 1 }))[0],
          (reserved) => backend.complete(q, reserved.id, { worker }),
          jobs,
          workers,
        );
        return { rate };
      });
      await measure("http /v1", `reserve + complete, ${workers} workers`, async () => {
        const q = queue();
        await preload(q, jobs);
        const rate = await cycle(
          async () => (await http(server, "POST", `/v1/queues/${q}/reserve`, { worker: "w" })).jobs?.[0],
          (reserved) => http(server, "POST", `/v1/queues/${q}/jobs/${reserved.id}/complete`, { worker: "w" }),
          jobs,
          workers,
        );
        return { rate };
      });
      await measure("backend", `complete + next in one call, ${workers} workers`, async () => {
        const q = queue();
        await preload(q, jobs);
        const worker = `w-${seq}`;
        const rate = await chainedCycle(
          async () => (await backend.reserve(q, { worker, count: 1 }))[0],
          async (reserved) => (await completeAndReserve(backend, q, reserved.id, { worker }, { worker })).next[0],
          jobs,
          workers,
        );
        return { rate };
      });
      await measure("http /v1", `complete + next in one call, ${workers} workers`, async () => {
        const q = queue();
        await preload(q, jobs);
        const rate = await chainedCycle(
          async () => (await http(server, "POST", `/v1/queues/${q}/reserve`, { worker: "w" })).jobs?.[0],
          async (reserved) =>
            (await http(server, "POST", `/v1/queues/${q}/jobs/${reserved.id}/complete`, { worker: "w", next: {} })).next?.[0],
          jobs,
          workers,
        );
        return { rate };
      });
    }
    // The latency the gateway adds at a steady rate: the same enqueues through the Backend here, then over HTTP.
    await measure("backend", `enqueue paced at ${PACED_RATE}/s`, () => {
      const q = queue();
      return paced(PACED_RATE, PACED_SECONDS, (i) => backend.enqueue(q, job(i)));
    });
    // The bare app and the gateway take turns, run by run, and the latency added is the median of each
    // pair's difference: a stall of this shared machine (a 100 ms pause puts a few seconds' p99 in it)
    // then lands in one pair, where pooled runs would carry it into the figure.
    const bareRuns: RunResult[] = [];
    const gatewayRuns: RunResult[] = [];
    for (let r = 0; r < PACED_PAIRS; r++) {
      bareRuns.push(await paced(PACED_RATE, PACED_SECONDS, (i) => http(bare, "POST", "/v1/queues/q/jobs", job(i))));
      const q = queue();
      gatewayRuns.push(await paced(PACED_RATE, PACED_SECONDS, (i) => http(server, "POST", `/v1/queues/${q}/jobs`, job(i))));
    }
    record("http bare hono", `POST paced at ${PACED_RATE}/s`, bareRuns);
    const gateway = record("http /v1", `enqueue paced at ${PACED_RATE}/s`, gatewayRuns);
    const addedAt = (p: number) =>
      +median(gatewayRuns.map((run, i) => percentile(run.latencies ?? [], p) - percentile(bareRuns[i]?.latencies ?? [], p))).toFixed(2);
    gateway.addedMs = { p50: addedAt(0.5), p99: addedAt(0.99), pairs: PACED_PAIRS };
  } finally {
    await baseline.close();
    server.stop();
    bare.stop();
    await backend.close();
    await cleanUp(name, store);
  }
  return rows;
}

const machine = `${cpus().length} x ${cpus()[0]?.model ?? "cpu"}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
process.stdout.write(`\nSwitchyard bench, ${new Date().toISOString().slice(0, 10)}, ${machine}; medians of ${RUNS} runs\n\n`);
process.stdout.write("| store | path | measure | jobs/s | vs baseline | p50 ms | p99 ms |\n| --- | --- | --- | --- | --- | --- | --- |\n");

/** The row a row is compared with, and how the comparison is named: see printRows. */
function baseOf(row: Row, rows: Row[]): { base: Row; label: string } | undefined {
  if (row.path === "baseline" || row.path === "http bare hono" || row.measure.includes("paced")) return undefined;
  const find = (path: string, measure: string) => rows.find((c) => c.path === path && c.measure.startsWith(measure));
  const named = (base: Row | undefined, label: string) => base && { base, label };
  if (row.measure.startsWith("enqueueBulk"))
    return row.path === "backend"
      ? named(find("baseline", "raw enqueueBulk"), "raw driver")
      : named(find("backend", "enqueueBulk"), "Backend");
  const inFlight = /(\d+) (in flight|workers)/.exec(row.measure)?.[1] ?? "50";
  if (row.path.startsWith("http")) return named(find("http bare hono", `POST, ${inFlight} `), "bare Hono");
  if (row.measure.startsWith("enqueue")) return named(find("baseline", `raw enqueue, ${inFlight} `), "raw driver");
  return named(find("baseline", `round trip, ${inFlight} `), "round trip");
}

/**
 * A store's rows, each with its ratio to a baseline of the same run: HTTP requests (`/v1`, the doors,
 * and the cycles, one request per job when chained) against the bare Hono app at the same
 * concurrency; HTTP bulks against the Backend's; Backend enqueues against the raw driver's writes,
 * Backend cycles against the store's round trip (one per job is the floor). Then
 * the latency the gateway adds at the paced rate over the bare app's (an upper bound: it includes
 * the store's own time, shown by the Backend's paced row).
 */
function printRows(rows: Row[]): void {
  for (const row of rows) {
    const compared = baseOf(row, rows);
    const ratio = compared ? `${(row.jobsPerSecond / compared.base.jobsPerSecond).toFixed(2)}x ${compared.label}` : "";
    process.stdout.write(
      `| ${row.store} | ${row.path} | ${row.measure} | ${row.jobsPerSecond} | ${ratio} | ${row.p50ms ?? ""} | ${row.p99ms ?? ""} |\n`,
    );
  }
  const pacedRow = (path: string) => rows.find((row) => row.path === path && row.measure.includes("paced"));
  const [gateway, alone] = [pacedRow("http /v1"), pacedRow("backend")];
  if (gateway?.addedMs) {
    const { p50, p99, pairs } = gateway.addedMs;
    process.stdout.write(
      `| ${gateway.store} | added by the gateway at ${PACED_RATE}/s | over the bare Hono app, median of ${pairs} alternated pairs (the store's own p50/p99: ${alone?.p50ms} / ${alone?.p99ms} ms) | | | ${p50} ms | ${p99} ms |\n`,
    );
  }
}

const only = process.argv.slice(2).filter((arg) => STORES.includes(arg as StoreName)) as StoreName[];
const all: Row[] = [];
for (const name of only.length > 0 ? only : STORES) {
  const rows = await benchStore(name);
  printRows(rows);
  all.push(...rows);
}
if (JSON_OUTPUT) for (const row of all) process.stdout.write(`${JSON.stringify({ machine, runs: RUNS, ...row })}\n`);
process.exit(0);
