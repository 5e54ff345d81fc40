#!/usr/bin/env node
// `npm run bench`: starts the throwaway servers as `npm test` does, runs bench/run.ts against them
// (the whole run, with no argument, then the million-job Redis-to-Redis migration of
// bench/migrate.ts), and stops them. Extra arguments pick stores (`npm run bench -- sqlite glidemq`);
// `npm run bench -- migrate` runs bench/migrate.ts instead (pairs as `sqlite>postgres`),
// `npm run bench -- resp` bench/resp.ts, `npm run bench -- bounded` bench/bounded.ts,
// `npm run bench -- pg-claims` bench/pg-claims.ts, `npm run bench -- many-queues`
// bench/many-queues.ts, `npm run bench -- large-keyspace` bench/large-keyspace.ts,
// `npm run bench -- large-queue [postgres|mysql|sqlite|cloudq]` bench/large-queue.ts,
// `npm run bench -- qless-core <checkout> [sqlite|postgres]`
// bench/qless-core-suite.ts (qless-core's own test suite through the RESP door).
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { startServices } from "./services.mjs";

const services = await startServices();
const [first, ...rest] = process.argv.slice(2);
const SCRIPTS = {
  migrate: "bench/migrate.ts",
  resp: "bench/resp.ts",
  bounded: "bench/bounded.ts",
  "pg-claims": "bench/pg-claims.ts",
  "many-queues": "bench/many-queues.ts",
  "large-keyspace": "bench/large-keyspace.ts",
  "large-queue": "bench/large-queue.ts",
  "qless-core": "bench/qless-core-suite.ts",
};
const [script, args] = SCRIPTS[first] ? [SCRIPTS[first], rest] : ["bench/run.ts", process.argv.slice(2)];
// The whole run (no store picked, not --quick) ends with the migration issue's headline measure: a
// million glide-mq jobs into qless, Redis to Redis, in-process and by the built command (jobs/s, peak RSS).
const whole = process.argv.length === 2;
const steps = whole
  ? [
      [script, args],
      ["bench/migrate.ts", ["--million", "glidemq>qless"]],
    ]
  : [[script, args]];

function runStep([file, stepArgs]) {
  return new Promise((resolve) => {
    const bench = spawn("npx", ["tsx", "--conditions=@switchyard/source", file, ...stepArgs], {
      stdio: "inherit",
      env: { ...process.env, ...services.env },
    });
    bench.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

let code = 0;
for (const step of steps) {
  code = await runStep(step);
  if (code !== 0) break;
}
services.stop();
setTimeout(() => rmSync(services.dir, { recursive: true, force: true }), 2000).unref();
process.exitCode = code;
