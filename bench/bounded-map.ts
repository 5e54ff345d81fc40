/**
 * `npm run bench -- bounded-map`: what keeping a Map within a bound costs per insert once it is full,
 * dropping the oldest entry per insert (`map.delete(map.keys().next().value)`, the baseline) against
 * core's `dropOldest` (the oldest tenth in one walk). Each insert adds a new key, as the gateway's qless
 * registries and the adapters' caches do. Medians of BENCH_RUNS runs (default 5), both ways alternated
 * in this process; no server involved.
 */
import { cpus } from "node:os";
import { dropOldest } from "@switchyard/core";

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const INSERTS = 200_000;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

type Bound = (map: Map<string, number>, most: number) => void;
const oneAtATime: Bound = (map, most) => {
  if (map.size > most) map.delete(map.keys().next().value as string);
};

/** µs per insert into a map already full at `most` entries. */
function run(bound: Bound, most: number): number {
  const map = new Map<string, number>();
  for (let i = 0; i < most; i++) map.set(`old${i}`, i);
  const started = performance.now();
  for (let i = 0; i < INSERTS; i++) {
    map.set(`new${i}`, i);
    bound(map, most);
  }
  return ((performance.now() - started) * 1000) / INSERTS;
}

console.log(`${cpus().length} x ${cpus()[0]?.model}, Node ${process.version}; ${INSERTS} inserts into a full map, medians of ${RUNS}`);
console.log("| entries | oldest one per insert | dropOldest | ratio |\n| ---: | ---: | ---: | ---: |");
for (const most of [1_000, 10_000, 100_000]) {
  const baseline: number[] = [];
  const batched: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    baseline.push(run(oneAtATime, most));
    batched.push(run(dropOldest, most));
  }
  const [b, d] = [median(baseline), median(batched)];
  console.log(`| ${most.toLocaleString("en")} | ${b.toFixed(2)} µs | ${d.toFixed(2)} µs | ${(b / d).toFixed(1)}x |`);
}
