import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseStored } from "../packages/glidemq-valkey/src/codec.js";
import {
  type FlowJob,
  type GlideJobOptions,
  GlideProducer,
  isPaused,
  jobCounts,
  loadScripts,
  queueKeys,
  setPaused,
} from "../packages/glidemq-valkey/src/index.js";
import { Normaliser, dumpDatabase } from "../packages/glidemq-valkey/test/support/key-dump.js";
import { untilPendingIdle } from "../packages/glidemq-valkey/test/support/pending.js";
import { type Outcome, type Processor, ReplayWorker } from "../packages/glidemq-valkey/test/support/replay-worker.js";
import { serviceUrl } from "./support/services.js";

/**
 * Replays every golden trace recorded from real glide-mq 0.15.4 (../shared/golden/glide-mq) through
 * our producer and consumer on an empty Redis database (db 5) with the same fake clock, and compares
 * the full key dump after every step. Normalised, as in the traces: stream entry ids, consumer ids,
 * and the worker registry's pid and host name. Nothing else.
 */
const GOLDEN = join(import.meta.dirname, "..", "..", "shared", "golden", "glide-mq");
const T0 = 1_700_000_000_000;

interface Step {
  step: {
    op: string;
    flow?: unknown;
    waitFor?: string;
    name?: string;
    data?: unknown;
    opts?: Record<string, unknown>;
    queueOpts?: { compression?: "gzip" };
    jobs?: Array<{ name: string; data: unknown; opts?: GlideJobOptions }>;
    ms?: number;
    id?: string;
    fields?: string[];
    where?: string;
  };
  result: unknown;
  keys: Record<string, unknown>;
}
interface Scenario {
  scenario: string;
  steps: Step[];
}

/** The processors the scenario descriptions name, as functions of the job and the fake clock. */
function processorFor(file: string, clock: { now: number }): (worker: number) => Processor {
  const data = (job: { data: unknown }) => job.data as Record<string, unknown>;
  const ok = (result: unknown): Outcome => ({ result });
  const table: Record<string, (worker: number) => Processor> = {
    "02": () => (job) => ok(job.data),
    "03": () => (job) => ok(`done-${data(job).k}`),
    "04": () => (job) => ok(job.name),
    "05": () => (job) => ok(job.name),
    "07": () => () => ok("ok"),
    "09": () => (job) => ok(data(job).k),
    "10": () => () => ok("ok"),
    "12": () => (job) => ok({ seen: job.data }),
    "13": () => (job) => {
      clock.now += 25;
      const ret = data(job).ret;
      if (ret === "fail") return { error: "bad thing" };
      return ok({ obj: { ok: true, list: [1, 2] }, str: "fine", num: 7, undef: undefined }[String(ret)]);
    },
    "14": () => (job) => {
      clock.now += 10;
      return ok(data(job).i);
    },
    "15": () => (job) =>
      job.attemptsMade < 2 ? { error: `flaky failure ${job.attemptsMade + 1}` } : ok({ attempt: job.attemptsMade + 1 }),
    "16": () => (job) => ({ error: `permanent failure ${data(job).k}` }),
    "17": () => (job) => {
      clock.now += 10;
      return { error: `fail ${data(job).i}` };
    },
    "18": (worker) => () => (worker === 1 ? "hold" : ok("recovered")),
    "19": () => () => ok("processed"),
    "20": () => (job) => (data(job).k === "hold" ? "hold" : data(job).k === "fail" ? { error: "nope" } : ok("ok")),
    "21": () => (job) => ok(job.name === "parent" ? "parent-done" : `child-${data(job).c}`),
    "22": () => (job) => (job.attemptsMade === 0 ? { error: "first try fails" } : ok("second-try")),
  };
  return (worker) => {
    const make = table[file.slice(0, 2)];
    if (!make) throw new Error(`the trace ${file} runs no worker`);
    return make(worker);
  };
}

/**
 * Clock moves the recording made without a clock.advance step, read off its timestamps: in 07 the
 * worker ran at T0+10 and the next add happened at T0+20.
 */
const UNLISTED_CLOCK_MOVES: Record<string, Record<number, { before: number; after: number }>> = {
  "07-dedup-simple.json": { 2: { before: 10, after: 10 } },
};

/** A started worker with no explicit close was closed once the last step that waits on it was done. */
function lastWorkerStep(steps: Step[]): number {
  let last = -1;
  steps.forEach(({ step }, i) => {
    if (step.op.startsWith("worker.") || step.op === "release held job" || (step.op === "clock.advance" && "waitFor" in step)) last = i;
  });
  return last;
}

const files = readdirSync(GOLDEN).filter((f) => f.endsWith(".json"));

describe("glidemq-valkey: golden traces of glide-mq 0.15.4, replayed step by step", () => {
  let redis: Redis;
  beforeAll(async () => {
    redis = new Redis(serviceUrl("redis"), { db: 5 });
    await loadScripts(redis);
  });
  afterAll(async () => {
    await redis.flushdb(); // db 5 belongs to this replay
    await redis.quit();
  });

  it("all 22 recorded traces are found and replayed", () => {
    expect(files).toHaveLength(22);
  });

  for (const file of files) {
    it(`${file}: same keys, values and results after every step`, async () => {
      const scenario = JSON.parse(readFileSync(join(GOLDEN, file), "utf8")) as Scenario;
      await redis.flushdb();
      const clock = { now: T0 };
      const now = () => clock.now;
      const keys = queueKeys("golden");
      const norm = new Normaliser();
      const processors = processorFor(file, clock);
      const workers: ReplayWorker[] = [];
      let worker: ReplayWorker | undefined;
      let seen = 0;
      const newWorker = (opts: Record<string, unknown> = {}) => {
        const w = new ReplayWorker(redis, "golden", processors(workers.length + 1), {
          clock: now,
          honourPause: false, // glide-mq workers ignore meta.paused; the trace records that (19)
          lockDuration: Number(opts.lockDuration ?? 30_000),
          stalledInterval: Number(opts.stalledInterval ?? 30_000),
          maxStalledCount: Number(opts.maxStalledCount ?? 1),
        });
        norm.addWorker(w.consumer.consumerId);
        workers.push(w);
        seen = 0;
        return w;
      };
      const newlyProcessed = (w: ReplayWorker) => {
        const fresh = w.processed.slice(seen);
        seen = w.processed.length;
        return fresh;
      };

      const closeAt = lastWorkerStep(scenario.steps);
      for (const [index, { step, result, keys: expected }] of scenario.steps.entries()) {
        let actual: unknown = null;
        const unlisted = UNLISTED_CLOCK_MOVES[file]?.[index];
        clock.now += unlisted?.before ?? 0;
        const producer = new GlideProducer(redis, "golden", { clock: now, ...(step.queueOpts ?? {}) });
        switch (step.op) {
          case "add":
            actual = await producer.add(step.name ?? "", step.data, step.opts as GlideJobOptions | undefined);
            break;
          case "flow.add":
            actual = await producer.addFlow(step.flow as FlowJob);
            break;
          case "addBulk":
            actual = (await producer.addBulk(step.jobs ?? [])).filter((id) => id !== null);
            break;
          case "getJobCounts":
            actual = await jobCounts(redis, keys);
            break;
          case "pause":
          case "resume":
            await setPaused(redis, keys, step.op === "pause");
            break;
          case "isPaused":
            actual = await isPaused(redis, keys);
            break;
          case "getJob": {
            const hash = await redis.hgetall(keys.job(step.id ?? ""));
            actual = Object.fromEntries((step.fields ?? []).map((f) => [f, parseStored(hash[f])]));
            break;
          }
          case "clock.advance":
            clock.now += step.ms ?? 0;
            actual = { now: clock.now };
            if (worker) {
              await worker.tick();
              if ((result as { processed?: unknown })?.processed) actual = { processed: newlyProcessed(worker) };
            }
            break;
          case "worker.start":
          case "worker.run": {
            const opts = step.opts ?? {};
            const stalledInterval = Number(opts.stalledInterval ?? 30_000);
            // The recording waited until its pending entries were idle long enough for the worker's XAUTOCLAIM.
            if (stalledInterval <= 1000) await untilPendingIdle(redis, keys, stalledInterval);
            worker = newWorker(opts);
            await worker.start();
            actual = step.where === "separate process" ? { activeJobId: worker.held?.id } : { processed: newlyProcessed(worker) };
            if (step.op === "worker.run") {
              await worker.close();
              worker = undefined;
            }
            break;
          }
          case "worker.close":
            await worker?.close();
            worker = undefined;
            break;
          case "kill -9 worker process":
            worker = undefined; // abandoned without closing, as a killed process leaves it
            actual = { killed: true };
            break;
          case "release held job":
            if (!worker) throw new Error("no worker holds a job");
            await worker.release("released");
            actual = { processed: newlyProcessed(worker) };
            break;
          default:
            throw new Error(`unknown step ${step.op}`);
        }
        clock.now += unlisted?.after ?? 0;
        if (index === closeAt && worker) {
          await worker.close();
          worker = undefined;
        }
        const where = `${file} step ${index} (${step.op})`;
        if (result !== null && typeof result === "object" && "processed" in (result as object)) {
          expect((actual as { processed: unknown }).processed, `${where}: processing order`).toEqual(
            (result as { processed: unknown }).processed,
          );
        } else if (step.op !== "worker.start" || step.where) {
          expect(actual, `${where}: result`).toEqual(result);
        }
        const dump = await dumpDatabase(redis, norm, keys.stream);
        expect(dump, `${where}: key dump`).toEqual(expected);
      }
      for (const w of workers) await w.close();
    });
  }
});
