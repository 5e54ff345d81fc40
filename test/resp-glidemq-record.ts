/**
 * Records what glide-mq 0.15.4's own Queue and Worker send to Redis and what Redis answers, for the
 * golden scenarios that test/resp-glidemq.test.ts replays through the RESP door. Run on demand (never
 * part of `npm test`: glide-mq is not installed here):
 *
 *   GLIDEMQ_PATH=/tmp/glide-build-sy npx tsx test/resp-glidemq-record.ts [scenario ...]
 *   npx biome format --write test/fixtures/resp-glidemq
 *
 * A recording TCP proxy sits between the client and a Redis of the recording's own (redis-server on
 * a free port, started empty, so the first scenario loads glide-mq's library as on a new server; it
 * sends `SELECT 4` on each upstream connection first, since glide-mq cannot choose a database). Each scenario's traffic is
 * written to test/fixtures/resp-glidemq/<scenario>.json as `{connection, args, reply}` in the order
 * Redis answered (with `libraryLoaded`: whether glide-mq's library was on the server before), with the body of `FUNCTION LOAD` cut to its `#!lua name=glidemq` header line (no
 * glide-mq code is kept).
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { type AddressInfo, connect, createServer } from "node:net";
import { join } from "node:path";
import { Redis } from "ioredis";
import { FrameReader, type WireReply } from "./resp-glidemq-wire.js";

const glidePath = process.env.GLIDEMQ_PATH;
if (!glidePath) throw new Error("set GLIDEMQ_PATH to a built glide-mq (see the header of this file)");
// biome-ignore lint/suspicious/noExplicitAny: glide-mq is loaded at run time from a path, untyped
const glide = createRequire(import.meta.url)(glidePath) as any;
const DB = 4;
const FIXTURES = join(import.meta.dirname, "fixtures", "resp-glidemq");
/** A Redis of this recording's own: function libraries are server-wide, and the shared one's are not ours to delete. */
async function startPrivateRedis(): Promise<{ url: URL; stop(): void }> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdio: "ignore",
  });
  const url = new URL(`redis://127.0.0.1:${port}`);
  const redis = new Redis(url.toString(), { lazyConnect: true, retryStrategy: () => 50 });
  redis.on("error", () => undefined); // refused until redis-server listens
  await until("redis-server to answer", async () => (await redis.ping().catch(() => "")) === "PONG");
  redis.disconnect();
  return { url, stop: () => child.kill() };
}

export interface RecordedCommand {
  connection: number;
  args: string[];
  reply: WireReply;
}

/** The library body is glide-mq's code: only its first line (name and nothing else) is kept. */
function withoutLibraryBody(args: string[]): string[] {
  if (args[0]?.toUpperCase() !== "FUNCTION" || args[1]?.toUpperCase() !== "LOAD") return args;
  return args.map((arg) => (arg.startsWith("#!lua") ? (arg.split("\n")[0] as string) : arg));
}

/** A proxy to Redis database 4 that notes every request and its reply, in the order replies come. */
async function startRecorder(redisUrl: URL): Promise<{ port: number; log: RecordedCommand[]; close(): Promise<void> }> {
  const log: RecordedCommand[] = [];
  let connections = 0;
  const sockets = new Set<import("node:net").Socket>();
  const server = createServer((client) => {
    const id = ++connections;
    const upstream = connect(Number(redisUrl.port), redisUrl.hostname);
    sockets.add(client).add(upstream);
    const pending: string[][] = [];
    let selectAnswered = false;
    const requests = new FrameReader();
    const replies = new FrameReader();
    upstream.write(`*2\r\n$6\r\nSELECT\r\n$1\r\n${DB}\r\n`);
    client.on("data", (chunk) => {
      for (const frame of requests.push(chunk)) pending.push(frame as string[]);
      upstream.write(chunk);
    });
    let skipBytes = "+OK\r\n".length;
    upstream.on("data", (chunk: Buffer) => {
      let data = chunk;
      if (!selectAnswered) {
        const skipped = Math.min(skipBytes, data.length);
        skipBytes -= skipped;
        data = data.subarray(skipped);
        selectAnswered = skipBytes === 0;
        if (data.length === 0) return;
      }
      for (const reply of replies.push(data)) {
        if (reply && typeof reply === "object" && !Array.isArray(reply) && "push" in reply) continue;
        const args = pending.shift() ?? ["?"];
        log.push({ connection: id, args: withoutLibraryBody(args), reply });
      }
      client.write(data);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    log,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
async function until(what: string, check: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// biome-ignore lint/suspicious/noExplicitAny: glide-mq's Job is untyped here
type GlideJob = any;
// biome-ignore lint/suspicious/noExplicitAny: glide-mq's Queue is untyped here
type GlideQueue = any;
type Processor = (job: GlideJob) => Promise<unknown>;
/** What each scenario does with glide-mq's Queue (and a Worker where the scenario has one). */
interface Scenario {
  description: string;
  run(
    queue: GlideQueue,
    startWorker: (
      processor: Processor,
      opts?: Record<string, unknown>,
    ) => Promise<{ close(): Promise<void>; done: GlideJob[]; failures: GlideJob[] }>,
  ): Promise<void>;
}

const workerOptions = { concurrency: 1, blockTimeout: 100, promotionInterval: 50 };

export const SCENARIOS: Record<string, Scenario> = {
  add: {
    description: "Queue.add of two jobs, getJob of each, getJobCounts",
    run: async (queue) => {
      await queue.add("send", { to: "a@example.com", n: 1 });
      await queue.add("send", { to: "b@example.com", n: 2 }, { attempts: 3 });
      await queue.getJob("1");
      await queue.getJob("2");
      await queue.getJob("404");
      await queue.getJobCounts();
    },
  },
  addBulk: {
    description: "Queue.addBulk of three jobs, one with attempts, then getJobCounts and getJob",
    run: async (queue) => {
      await queue.addBulk([
        { name: "a", data: { i: 1 } },
        { name: "b", data: { i: 2 }, opts: { attempts: 2 } },
        { name: "c", data: "three" },
      ]);
      await queue.getJobCounts();
      await queue.getJob("2");
    },
  },
  delay: {
    description: "a job with delay 60000 next to an immediate one: counts show one delayed, one waiting",
    run: async (queue) => {
      await queue.add("later", { k: "later" }, { delay: 60_000 });
      await queue.add("now", { k: "now" });
      await queue.getJobCounts();
      await queue.getJob("1");
    },
  },
  priority: {
    description: "jobs with priorities 5 and 1 next to a plain one",
    run: async (queue) => {
      await queue.add("p5", {}, { priority: 5 });
      await queue.add("p1", {}, { priority: 1 });
      await queue.add("plain", {});
      await queue.getJobCounts();
    },
  },
  "worker-success": {
    description: "two jobs, a Worker returns a value for each, getJob reads the return value, counts",
    run: async (queue, startWorker) => {
      await queue.add("echo", { n: 1 });
      await queue.add("echo", { n: 2 });
      const worker = await startWorker(async (job) => ({ doubled: job.data.n * 2 }));
      await until("two completed", () => worker.done.length === 2);
      await worker.close();
      await queue.getJob("1");
      await queue.getJobCounts();
    },
  },
  retry: {
    description: "attempts 3 with a fixed backoff of 200 ms: fails twice, then succeeds",
    run: async (queue, startWorker) => {
      await queue.add("flaky", { k: 1 }, { attempts: 3, backoff: { type: "fixed", delay: 200 } });
      const worker = await startWorker(async (job) => {
        if (job.attemptsMade < 2) throw new Error(`flaky failure ${job.attemptsMade + 1}`);
        return "third time";
      });
      await until("completed", () => worker.done.length === 1);
      await worker.close();
      await queue.getJob("1");
      await queue.getJobCounts();
    },
  },
  fail: {
    description: "attempts 2 always throwing ends failed with failedReason; a job without attempts fails at once",
    run: async (queue, startWorker) => {
      await queue.add("doomed", { k: 1 }, { attempts: 2, backoff: { type: "fixed", delay: 100 } });
      await queue.add("once", { k: 2 });
      const worker = await startWorker(async (job) => {
        throw new Error(`permanent failure ${job.data.k}`);
      });
      // Three failures: the doomed job's two runs and the other job's one.
      await until("three failures", () => worker.failures.length === 3);
      await worker.close();
      await queue.getJob("1");
      await queue.getJobCounts();
    },
  },
  "pause-resume": {
    description: "Queue.pause, isPaused, resume, isPaused",
    run: async (queue) => {
      await queue.add("p", {});
      await queue.pause();
      await queue.isPaused();
      await queue.resume();
      await queue.isPaused();
    },
  },
  "job-counts": {
    description: "getJobCounts with waiting, delayed, prioritized, completed and failed jobs",
    run: async (queue, startWorker) => {
      await queue.add("ok", { k: "ok" });
      await queue.add("fail", { k: "fail" });
      const worker = await startWorker(async (job) => {
        if (job.data.k === "fail") throw new Error("nope");
        return "ok";
      });
      await until("one completed, one failed", () => worker.done.length === 1 && worker.failures.length === 1);
      await worker.close();
      await queue.add("waiting", {});
      await queue.add("delayed", {}, { delay: 60_000 });
      await queue.add("prioritized", {}, { priority: 3 });
      await queue.getJobCounts();
    },
  },
};

async function record(name: string, scenario: Scenario, redisUrl: URL): Promise<void> {
  const redis = new Redis(redisUrl.toString(), { db: DB });
  const queueName = `rg-${name}`;
  for (const key of await redis.keys(`glide:{${queueName}}:*`)) await redis.del(key);
  const redisVersion = /redis_version:(\S+)/.exec(await redis.info("server"))?.[1];
  // Functions are server-wide (not ours to delete): the replay starts from the same state.
  const libraryLoaded = await redis.call("FCALL", "glidemq_version", 0).then(
    () => true,
    () => false,
  );
  const recorder = await startRecorder(redisUrl);
  const connection = { addresses: [{ host: "127.0.0.1", port: recorder.port }] };
  const queue = new glide.Queue(queueName, { connection });
  const workers: Array<{ close(): Promise<void> }> = [];
  await scenario.run(queue, async (processor, opts = {}) => {
    // The worker's own events tell when a step is over: polling counts would record a timing-dependent number of reads.
    const done: GlideJob[] = [];
    const failures: GlideJob[] = [];
    const worker = new glide.Worker(queueName, processor, { connection, ...workerOptions, ...opts });
    worker.on("completed", (job: GlideJob) => done.push(job));
    worker.on("failed", (job: GlideJob) => failures.push(job));
    worker.on("error", () => undefined);
    await worker.waitUntilReady();
    workers.push(worker);
    // A worker's blocked XREADGROUP may outlive close(): let it end before the scenario goes on.
    return { close: () => worker.close().then(() => sleep(300)), done, failures };
  });
  await queue.close();
  await sleep(100);
  await recorder.close();
  await redis.quit();
  const file = join(FIXTURES, `${name}.json`);
  writeFileSync(
    file,
    `${JSON.stringify({ scenario: name, description: scenario.description, queue: queueName, libraryLoaded, recordedWith: `glide-mq 0.15.4, @valkey/valkey-glide, Redis ${redisVersion}`, commands: recorder.log }, null, 1)}\n`,
  );
  console.log(`${name}: ${recorder.log.length} commands -> ${file}`);
}

const privateRedis = await startPrivateRedis();
const wanted = process.argv.slice(2);
for (const [name, scenario] of Object.entries(SCENARIOS))
  if (wanted.length === 0 || wanted.includes(name)) await record(name, scenario, privateRedis.url);
privateRedis.stop();
process.exit(0);
