/**
 * Throughput of @switchyard/glidemq-valkey against one Redis, beside raw ioredis baselines measured
 * in the same process and run (and glide-mq's own Queue/Worker when GLIDEMQ_PATH points at a build).
 * Run on demand, never in `npm test`:
 *
 *   BENCH_REDIS_URL=redis://127.0.0.1:6379 [GLIDEMQ_PATH=/tmp/glide-build] npx tsx bench/glidemq.ts [--redis-cost]
 *
 * Enqueue: serial `add` and `add` with 10/50 calls in flight, `addBulk` in chunks of 1000.
 * Process: a no-op processor at concurrency 1/10/50 over preloaded jobs. Each figure is the median
 * of RUNS runs, in jobs per second. Every run uses a fresh queue.
 * Beside the package's own GlideProducer/GlideWorker, the `Backend` path that every door of the
 * gateway uses: `enqueue`/`enqueueBulk`, and workers that reserve once then complete each job and
 * take the next in one call (`completeAndReserve`), as glide-mq's Worker does with completeAndFetchNext.
 *
 * With `--redis-cost`, instead: Redis's own CPU time per job (INFO cpu, user + sys), script calls and
 * commands run inside them per job (INFO commandstats after CONFIG RESETSTAT) for the Backend paths
 * and glide-mq's, each the median of RUNS runs. Unlike rates, these hold on a shared machine; run it
 * against a Redis of its own (the figures are the whole server's).
 */
import { createRequire } from "node:module";
import { cpus } from "node:os";
import { completeAndReserve } from "@switchyard/core";
import { Redis } from "ioredis";
import { GlideProducer, GlideWorker, createGlideMqBackend, loadScripts, queueKeys } from "../packages/glidemq-valkey/src/index.js";
import { redisCpuMicros } from "./harness.js";

const url = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const ENQUEUE_JOBS = Number(process.env.BENCH_ENQUEUE_JOBS ?? 5000);
const PROCESS_JOBS = Number(process.env.BENCH_PROCESS_JOBS ?? 20000);
const redis = new Redis(url);
/** The adapter as the gateway holds it, on its own connection as in a gateway process. */
const backend = createGlideMqBackend({ url });
let seq = 0;
const fresh = (what: string) => `bench-${what}-${Date.now().toString(36)}-${seq++}`;
// biome-ignore lint/suspicious/noExplicitAny: glide-mq is loaded at run time from a path, untyped
const glide = process.env.GLIDEMQ_PATH ? (createRequire(import.meta.url)(process.env.GLIDEMQ_PATH) as any) : undefined;
const { hostname, port } = new URL(url);
const glideConnection = { addresses: [{ host: hostname, port: Number(port) }] };

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
async function rate(n: number, body: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await body();
  return n / (Number(process.hrtime.bigint() - start) / 1e9);
}
/** `n` calls of `call`, with `inFlight` of them outstanding at any time. */
async function concurrently(n: number, inFlight: number, call: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < n) await call(next++);
    }),
  );
}
async function until(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((r) => setTimeout(r, 5));
}
/**
 * Jobs per second between 5% and 100% of `n` completions, so that a worker's start-up (connections,
 * library checks) is left out for every worker alike.
 */
async function steadyRate(completedKey: string, n: number): Promise<number> {
  const first = Math.ceil(n * 0.05);
  await until(async () => (await redis.zcard(completedKey)) >= first);
  const start = process.hrtime.bigint();
  await until(async () => (await redis.zcard(completedKey)) >= n);
  return (n - first) / (Number(process.hrtime.bigint() - start) / 1e9);
}
async function preload(q: string, n: number): Promise<void> {
  const producer = new GlideProducer(redis, q);
  for (let i = 0; i < n; i += 1000)
    await producer.addBulk(Array.from({ length: Math.min(1000, n - i) }, (_, j) => ({ name: "job", data: { i: i + j } })));
}
async function drop(q: string): Promise<void> {
  const keys = await redis.keys(`${queueKeys(q).base}*`);
  for (let i = 0; i < keys.length; i += 1000) await redis.unlink(...keys.slice(i, i + 1000));
}

type Case = { label: string; run: () => Promise<number> };
const jobsAt = (c: number) => (c === 1 ? PROCESS_JOBS / 4 : PROCESS_JOBS);

const enqueueCases: Case[] = [
  ...[1, 10, 50].map((c) => ({
    label: `switchyard add, ${c} in flight`,
    run: async () => {
      const q = fresh("add");
      const producer = new GlideProducer(redis, q);
      const r = await rate(ENQUEUE_JOBS, () => concurrently(ENQUEUE_JOBS, c, (i) => producer.add("job", { i })));
      await drop(q);
      return r;
    },
  })),
  ...[1, 10, 50].map((c) => ({
    label: `switchyard Backend enqueue, ${c} in flight`,
    run: async () => {
      const q = fresh("benq");
      const r = await rate(ENQUEUE_JOBS, () => concurrently(ENQUEUE_JOBS, c, (i) => backend.enqueue(q, { name: "job", data: { i } })));
      await drop(q);
      return r;
    },
  })),
  {
    label: "switchyard Backend enqueueBulk (chunks of 1000)",
    run: async () => {
      const q = fresh("bbulk");
      const r = await rate(PROCESS_JOBS, async () => {
        for (let i = 0; i < PROCESS_JOBS; i += 1000)
          await backend.enqueueBulk(
            q,
            Array.from({ length: Math.min(1000, PROCESS_JOBS - i) }, (_, j) => ({ name: "job", data: { i: i + j } })),
          );
      });
      await drop(q);
      return r;
    },
  },
  {
    label: "switchyard addBulk (chunks of 1000)",
    run: async () => {
      const q = fresh("bulk");
      const r = await rate(PROCESS_JOBS, () => preload(q, PROCESS_JOBS));
      await drop(q);
      return r;
    },
  },
  ...[1, 10, 50].map((c) => ({
    label: `raw ioredis XADD, ${c} in flight`,
    run: async () => {
      const key = fresh("xadd");
      const r = await rate(ENQUEUE_JOBS, () =>
        concurrently(ENQUEUE_JOBS, c, (i) => redis.xadd(key, "*", "jobId", String(i), "name", "job")),
      );
      await redis.unlink(key);
      return r;
    },
  })),
];

const processCases = (c: number): Case[] => [
  {
    label: `switchyard GlideWorker, concurrency ${c}`,
    run: async () => {
      const q = fresh("proc");
      const n = jobsAt(c);
      await preload(q, n);
      const worker = new GlideWorker(redis, q, () => undefined, { concurrency: c });
      await worker.start();
      const r = await steadyRate(queueKeys(q).completed, n);
      await worker.close();
      await drop(q);
      return r;
    },
  },
  {
    label: `switchyard Backend reserve, then complete + next in one call, ${c} workers`,
    run: async () => {
      const q = fresh("bproc");
      const n = jobsAt(c);
      await preload(q, n);
      let done = 0;
      const r = await rate(n, () =>
        Promise.all(
          Array.from({ length: c }, async (_, k) => {
            const worker = `w${k}`;
            let [job] = await backend.reserve(q, { worker });
            for (; job; done++) [job] = (await completeAndReserve(backend, q, job.id, { worker }, { worker })).next;
          }),
        ).then(() => undefined),
      );
      await drop(q);
      if (done !== n) throw new Error(`the Backend path processed ${done} of ${n}`);
      return r;
    },
  },
  {
    label: `raw ioredis XREADGROUP + XACK/XDEL, ${c} consumers`,
    run: async () => {
      const key = fresh("raw");
      const n = jobsAt(c);
      for (let i = 0; i < n; i += 1000) {
        const p = redis.pipeline();
        for (let j = i; j < Math.min(n, i + 1000); j++) p.xadd(key, "*", "jobId", String(j), "name", "job");
        await p.exec();
      }
      await redis.xgroup("CREATE", key, "g", "0");
      let done = 0;
      const r = await rate(n, () =>
        Promise.all(
          Array.from({ length: c }, async (_, k) => {
            for (;;) {
              const reply = (await redis.xreadgroup("GROUP", "g", `c${k}`, "COUNT", 1, "STREAMS", key, ">")) as Array<
                [string, Array<[string]>]
              > | null;
              const entry = reply?.[0]?.[1]?.[0];
              if (!entry) return;
              await redis.multi().xack(key, "g", entry[0]).xdel(key, entry[0]).exec();
              done++;
            }
          }),
        ).then(() => undefined),
      );
      await redis.unlink(key);
      if (done !== n) throw new Error(`raw baseline processed ${done} of ${n}`);
      return r;
    },
  },
  {
    label: `raw ioredis RPOP loop, ${c} consumers`,
    run: async () => {
      const key = fresh("list");
      const n = jobsAt(c);
      for (let i = 0; i < n; i += 1000) await redis.lpush(key, ...Array.from({ length: Math.min(1000, n - i) }, (_, j) => String(i + j)));
      const r = await rate(n, () =>
        Promise.all(
          Array.from({ length: c }, async () => {
            while ((await redis.rpop(key)) !== null) {}
          }),
        ).then(() => undefined),
      );
      return r;
    },
  },
];

/**
 * glide-mq's own Queue and Worker. A closed glide-mq Worker's client threads linger for a moment, so
 * each run waits half a second before the next case starts.
 */
const glideCases = (): Case[] =>
  glide
    ? [
        ...[1, 10, 50].map((c) => ({
          label: `glide-mq Queue.add, ${c} in flight`,
          run: async () => {
            const q = fresh("gadd");
            const queue = new glide.Queue(q, { connection: glideConnection });
            await queue.add("warm", {});
            const r = await rate(ENQUEUE_JOBS, () => concurrently(ENQUEUE_JOBS, c, (i) => queue.add("job", { i })));
            await queue.close();
            await new Promise((resolve) => setTimeout(resolve, 200));
            await drop(q);
            return r;
          },
        })),
        {
          label: "glide-mq Queue.addBulk (chunks of 1000)",
          run: async () => {
            const q = fresh("gbulk");
            const queue = new glide.Queue(q, { connection: glideConnection });
            await queue.add("warm", {});
            const r = await rate(PROCESS_JOBS, async () => {
              for (let i = 0; i < PROCESS_JOBS; i += 1000)
                await queue.addBulk(
                  Array.from({ length: Math.min(1000, PROCESS_JOBS - i) }, (_, j) => ({ name: "job", data: { i: i + j } })),
                );
            });
            await queue.close();
            await new Promise((resolve) => setTimeout(resolve, 200));
            await drop(q);
            return r;
          },
        },
        ...[1, 10, 50].map((c) => ({
          label: `glide-mq Worker, concurrency ${c}`,
          run: async () => {
            const q = fresh("gproc");
            const n = jobsAt(c);
            await preload(q, n);
            const worker = new glide.Worker(q, async () => undefined, { connection: glideConnection, concurrency: c });
            worker.on("error", () => undefined);
            const r = await steadyRate(queueKeys(q).completed, n);
            await worker.close();
            await new Promise((resolve) => setTimeout(resolve, 500));
            await drop(q);
            return r;
          },
        })),
      ]
    : [];

/** Redis's CPU µs, script calls and commands per job while `body` handles `n` jobs. */
async function redisCost(n: number, body: () => Promise<void>): Promise<{ cpu: number; scripts: number; commands: number }> {
  const cpu = () => redisCpuMicros(redis);
  await redis.config("RESETSTAT");
  const before = await cpu();
  await body();
  const used = (await cpu()) - before;
  let scripts = 0;
  let commands = 0;
  for (const [, name, calls] of (await redis.info("commandstats")).matchAll(/cmdstat_([^:]+):calls=(\d+)/g)) {
    if (name === "info" || name?.startsWith("config")) continue;
    if (name === "evalsha" || name === "eval" || name === "fcall") scripts += Number(calls);
    else commands += Number(calls);
  }
  return { cpu: used / n, scripts: scripts / n, commands: commands / n };
}

type CostCase = { label: string; run: () => Promise<{ cpu: number; scripts: number; commands: number }> };
const costJobs = PROCESS_JOBS;
const costCases = (): CostCase[] => [
  {
    label: "Backend enqueueBulk (pages of 1000)",
    run: async () => {
      const q = fresh("cbulk");
      const cost = await redisCost(costJobs, async () => {
        for (let i = 0; i < costJobs; i += 1000)
          await backend.enqueueBulk(
            q,
            Array.from({ length: Math.min(1000, costJobs - i) }, (_, j) => ({ name: "job", data: { i: i + j } })),
          );
      });
      await drop(q);
      return cost;
    },
  },
  {
    label: "Backend enqueue, 50 in flight",
    run: async () => {
      const q = fresh("cenq");
      const cost = await redisCost(costJobs, () => concurrently(costJobs, 50, (i) => backend.enqueue(q, { name: "job", data: { i } })));
      await drop(q);
      return cost;
    },
  },
  ...[10, 50].map((c) => ({
    label: `Backend reserve, then complete + next in one call, ${c} workers`,
    run: async () => {
      const q = fresh("ccyc");
      await preload(q, costJobs);
      const cost = await redisCost(costJobs, () =>
        Promise.all(
          Array.from({ length: c }, async (_, k) => {
            const worker = `w${k}`;
            let [job] = await backend.reserve(q, { worker });
            while (job) [job] = (await completeAndReserve(backend, q, job.id, { worker }, { worker })).next;
          }),
        ).then(() => undefined),
      );
      await drop(q);
      return cost;
    },
  })),
  ...(glide
    ? [
        {
          label: "glide-mq Queue.addBulk (chunks of 1000)",
          run: async () => {
            const q = fresh("cgbulk");
            const queue = new glide.Queue(q, { connection: glideConnection });
            await queue.add("warm", {});
            const cost = await redisCost(costJobs, async () => {
              for (let i = 0; i < costJobs; i += 1000)
                await queue.addBulk(Array.from({ length: Math.min(1000, costJobs - i) }, (_, j) => ({ name: "job", data: { i: i + j } })));
            });
            await queue.close();
            await new Promise((resolve) => setTimeout(resolve, 200));
            await drop(q);
            return cost;
          },
        },
        ...[10, 50].map((c) => ({
          label: `glide-mq Worker, concurrency ${c}`,
          run: async () => {
            const q = fresh("cgproc");
            await preload(q, costJobs);
            const worker = new glide.Worker(q, async () => undefined, { connection: glideConnection, concurrency: c });
            worker.on("error", () => undefined);
            // From its first completion on, so that the worker's start-up is left out.
            await until(async () => (await redis.zcard(queueKeys(q).completed)) > 0);
            const started = await redis.zcard(queueKeys(q).completed);
            const cost = await redisCost(costJobs - started, () =>
              until(async () => (await redis.zcard(queueKeys(q).completed)) >= costJobs),
            );
            await worker.close();
            await new Promise((resolve) => setTimeout(resolve, 500));
            await drop(q);
            return cost;
          },
        })),
      ]
    : []),
];

async function reportCosts(): Promise<void> {
  console.log(`\n## Redis per job (${costJobs} jobs a run)\n\n| case | Redis CPU µs/job | script calls/job | commands/job | runs (µs) |`);
  console.log("| --- | ---: | ---: | ---: | ---: |");
  for (const c of costCases()) {
    const runs = [];
    for (let i = 0; i < RUNS; i++) runs.push(await c.run());
    const cpu = median(runs.map((r) => r.cpu));
    const scripts = median(runs.map((r) => r.scripts));
    const commands = median(runs.map((r) => r.commands));
    const each = runs.map((r) => r.cpu.toFixed(1)).join(" / ");
    console.log(`| ${c.label} | ${cpu.toFixed(1)} | ${scripts.toFixed(3)} | ${commands.toFixed(2)} | ${each} |`);
  }
}

async function main(): Promise<void> {
  await loadScripts(redis);
  const server = ((await redis.info("server")).match(/redis_version:(\S+)/) ?? [])[1];
  console.log(
    `# glidemq-valkey benchmark: ${cpus().length} x ${cpus()[0]?.model ?? "?"}, Node ${process.version}, Redis ${server}, median of ${RUNS} runs`,
  );
  if (process.argv.includes("--redis-cost")) return reportCosts();
  // Runs of a section are interleaved (A B C, then C B A, ...) so that every case sees the same load
  // on a shared machine; glide-mq's cases get a pause after closing, see glideCases.
  const report = async (title: string, cases: Case[]) => {
    console.log(`\n## ${title}\n\n| case | jobs/s (median) | runs |\n| --- | ---: | ---: |`);
    const results = cases.map(() => [] as number[]);
    for (let i = 0; i < RUNS; i++) {
      const order = cases.map((_, index) => index);
      if (i % 2 === 1) order.reverse();
      for (const index of order) results[index]?.push(await (cases[index] as Case).run());
    }
    cases.forEach((c, index) => {
      const runs = (results[index] ?? []).map((r) => Math.round(r).toLocaleString("en-US")).join(" / ");
      console.log(`| ${c.label} | ${Math.round(median(results[index] ?? [])).toLocaleString("en-US")} | ${runs} |`);
    });
  };
  const glideAt = (label: string) => glideCases().filter((c) => c.label.endsWith(label));
  for (const c of [1, 10, 50]) {
    await report(`Enqueue, ${c} in flight (${ENQUEUE_JOBS} jobs)`, [
      ...enqueueCases.filter((e) => e.label.endsWith(` ${c} in flight`)),
      ...glideAt(`add, ${c} in flight`),
    ]);
  }
  await report(
    `Bulk enqueue (${PROCESS_JOBS} jobs)`,
    [...enqueueCases, ...glideCases()].filter((e) => e.label.includes("Bulk")),
  );
  for (const c of [1, 10, 50]) {
    await report(`Process, concurrency ${c} (${jobsAt(c)} jobs, no-op processor)`, [
      ...processCases(c),
      ...glideAt(`Worker, concurrency ${c}`),
    ]);
  }
}

main()
  .then(() => backend.close())
  .then(() => redis.quit())
  .then(() => process.exit(0))
  .catch((error) => {
    console.error(error);
    process.exit(1);
  });
