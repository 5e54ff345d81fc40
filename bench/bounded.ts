/**
 * `npm run bench -- bounded`: what the gateway's bounded in-memory structures cost per insert once
 * they are full, each against the way it was done before, alternated in this process (medians of
 * BENCH_RUNS runs, default 5; no server involved):
 * - a Map kept within a bound (the adapters' caches, the qless doors' registries): dropping the oldest
 *   entry per insert (`map.delete(map.keys().next().value)`) against core's `dropOldest`;
 * - the qless doors' completed jobs (`ql:completed`), each completion expiring the oldest beyond
 *   `jobs-history-count`: splicing it off the front of the array against `QlessCompleted`.
 */
import { cpus } from "node:os";
import { dropOldest } from "@switchyard/core";
import { type CompletedJob, QlessCompleted } from "../apps/gateway/src/doors/qless-state.js";

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const INSERTS = 100_000;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

/** µs per insert (median of RUNS) for each way, run alternately. */
function compare(ways: Array<() => number>): number[] {
  const results = ways.map(() => [] as number[]);
  for (let r = 0; r < RUNS; r++) ways.forEach((way, i) => results[i]?.push(way()));
  return results.map(median);
}

function timed(fill: () => (i: number) => void): number {
  const insert = fill();
  const started = performance.now();
  for (let i = 0; i < INSERTS; i++) insert(i);
  return ((performance.now() - started) * 1000) / INSERTS;
}

/** A Map full at `most` entries; each insert adds a new key and bounds the map. */
const mapInserts = (most: number, bound: (map: Map<string, number>) => void) => () => {
  const map = new Map<string, number>();
  for (let i = 0; i < most; i++) map.set(`old${i}`, i);
  return (i: number) => {
    map.set(`new${i}`, i);
    bound(map);
  };
};

/** The completed list before: an array spliced at its end to add and at its front to expire, as it was. */
function splicedCompletions(keep: number) {
  const list: CompletedJob[] = [];
  return (entry: CompletedJob) => {
    list.splice(list.length, 0, entry);
    list.splice(0, Math.max(0, list.length - keep));
  };
}

/** `keep` completions first, then each insert completes one more job and expires the oldest. */
const completions = (keep: number, complete: (entry: CompletedJob) => void) => () => {
  for (let i = 0; i < keep; i++) complete({ queue: "q", jid: `old${i}`, at: i });
  return (i: number) => complete({ queue: "q", jid: `new${i}`, at: keep + i });
};

console.log(
  `${cpus().length} x ${cpus()[0]?.model}, Node ${process.version}; ${INSERTS} inserts into a full structure, medians of ${RUNS}\n`,
);
console.log("| a Map of | oldest one per insert | dropOldest | ratio |\n| ---: | ---: | ---: | ---: |");
for (const most of [1_000, 10_000, 100_000]) {
  const [before, after] = compare([
    () => timed(mapInserts(most, (map) => map.size > most && map.delete(map.keys().next().value as string))),
    () => timed(mapInserts(most, (map) => dropOldest(map, most))),
  ]) as [number, number];
  console.log(
    `| ${most.toLocaleString("en")} entries | ${before.toFixed(2)} µs | ${after.toFixed(2)} µs | ${(before / after).toFixed(1)}x |`,
  );
}
console.log("\n| completed jobs kept | front spliced off | QlessCompleted | ratio |\n| ---: | ---: | ---: | ---: |");
const backend = {} as Parameters<QlessCompleted["add"]>[0];
for (const keep of [10_000, 50_000]) {
  const [before, after] = compare([
    () => timed(completions(keep, splicedCompletions(keep))),
    () =>
      timed(() => {
        const completed = new QlessCompleted();
        return completions(keep, (entry) => {
          completed.add(backend, entry);
          completed.expire(backend, -1, keep);
        })();
      }),
  ]) as [number, number];
  console.log(`| ${keep.toLocaleString("en")} | ${before.toFixed(2)} µs | ${after.toFixed(2)} µs | ${(before / after).toFixed(1)}x |`);
}
