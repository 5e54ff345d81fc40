/**
 * `npm run bench -- pg-claims`: one worker's reserve and complete on PostgreSQL, one job at a time,
 * with and without prepared statements (the `preparedStatements` option), and with and without the
 * `(sy_queue, status)` index that versions before 2026-11-28 made beside the claim index (made here
 * by hand, as an old table has it). Each variant gets a fresh table holding a queue of BIG_QUEUE jobs
 * in three priorities and one of SMALL_QUEUE, timed first as PostgreSQL leaves a table it has never
 * analyzed (a bulk load, a migration's first minute), then after `analyze`, then on a third queue of
 * BIG_QUEUE jobs loaded after that (statistics that know neither it nor its held jobs). Variants
 * alternate, ROUNDS times; medians of each variant's per-call medians. Never part of `npm test`.
 *
 *   npm run bench -- pg-claims          # BENCH_ROUNDS (2), BENCH_CALLS (100), BENCH_BIG_QUEUE (100,000)
 */
import { cpus, loadavg } from "node:os";
import type { Backend } from "@switchyard/core";
import { createWorkerQueueBackend } from "@switchyard/workerqueue-sql";
import knexFactory from "knex";
import { serviceUrl } from "../test/support/services.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const CALLS = Number(process.env.BENCH_CALLS ?? 100);
const BIG_QUEUE = Number(process.env.BENCH_BIG_QUEUE ?? 100_000);
const SMALL_QUEUE = 400;

interface Variant {
  label: string;
  preparedStatements: boolean;
  oldIndex: boolean;
}
const VARIANTS: Variant[] = [
  { label: "unprepared, old index (before)", preparedStatements: false, oldIndex: true },
  { label: "unprepared, claim index only", preparedStatements: false, oldIndex: false },
  { label: "prepared, claim index only (now)", preparedStatements: true, oldIndex: false },
];

const url = serviceUrl("postgres");
const admin = knexFactory({ client: "pg", connection: url, pool: { min: 0, max: 1 } });
const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? Number.NaN;

/** Medians of CALLS reserves and completes of one job each, in ms. */
async function cycle(backend: Backend, queue: string): Promise<{ reserve: number; complete: number }> {
  const reserves: number[] = [];
  const completes: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    let started = performance.now();
    const [job] = await backend.reserve(queue, { worker: "bench" });
    reserves.push(performance.now() - started);
    if (!job) throw new Error(`${queue} ran out of jobs`);
    started = performance.now();
    await backend.complete(queue, job.id, { worker: "bench" });
    completes.push(performance.now() - started);
  }
  return { reserve: median(reserves), complete: median(completes) };
}

type Figures = Record<string, number>;

async function run(variant: Variant): Promise<Figures> {
  const table = `bench_claims_${Date.now().toString(36)}`;
  const backend = createWorkerQueueBackend({ url, table, preparedStatements: variant.preparedStatements });
  try {
    await backend.ready();
    if (variant.oldIndex) await admin.raw("create index ?? on ?? (sy_queue, status)", [`${table}_sy_queue_status_idx`, table]);
    const loadBig = async (queue: string) => {
      for (let written = 0; written < BIG_QUEUE; written += 1000) {
        await backend.enqueueBulk(
          queue,
          Array.from({ length: 1000 }, (_, i) => ({ name: "bench", data: { i }, priority: i % 3 })),
        );
      }
    };
    await loadBig("big");
    await backend.enqueueBulk(
      "small",
      Array.from({ length: SMALL_QUEUE }, (_, i) => ({ name: "bench", data: { i } })),
    );
    const figures: Figures = {};
    const time = async (label: string, queue: string) => {
      const { reserve, complete } = await cycle(backend, queue);
      figures[`${label}: reserve`] = reserve;
      figures[`${label}: complete`] = complete;
    };
    for (const queue of ["big", "small"]) await time(`fresh ${queue}`, queue);
    await admin.raw("analyze ??", [table]);
    for (const queue of ["big", "small"]) await time(`analyzed ${queue}`, queue);
    // A queue that comes after the last ANALYZE: its statistics know neither it nor its held jobs.
    await loadBig("late");
    await time("late big", "late");
    return figures;
  } finally {
    await backend.close();
    await admin.schema.dropTableIfExists(table);
    await admin.schema.dropTableIfExists(`${table}_paused_queues`);
    await admin.schema.dropTableIfExists(`${table}_sy_recurring`);
  }
}

const results = new Map<string, Figures[]>(VARIANTS.map((variant) => [variant.label, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const variant of VARIANTS) {
    results.get(variant.label)?.push(await run(variant));
    process.stderr.write(`[bench] round ${round + 1}: ${variant.label}\n`);
  }
}
await admin.destroy();

const [model] = cpus();
console.log(
  `\n${cpus().length} x ${model?.model ?? "CPU"}, load ${loadavg()[0]?.toFixed(2)}; ${BIG_QUEUE} + ${SMALL_QUEUE} jobs, ${CALLS} calls per figure, ${ROUNDS} rounds`,
);
const figureNames = Object.keys(results.get(VARIANTS[0]?.label ?? "")?.[0] ?? {});
console.log(`| ms, one worker | ${VARIANTS.map((variant) => variant.label).join(" | ")} |`);
console.log(`| --- | ${VARIANTS.map(() => "---:").join(" | ")} |`);
for (const name of figureNames) {
  const cells = VARIANTS.map((variant) =>
    median((results.get(variant.label) ?? []).map((figures) => figures[name] ?? Number.NaN)).toFixed(2),
  );
  console.log(`| ${name} | ${cells.join(" | ")} |`);
}
process.exit(0);
