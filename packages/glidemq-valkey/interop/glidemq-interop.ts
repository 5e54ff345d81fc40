/**
 * Interop check against a real glide-mq, run on demand (never part of `npm test`: glide-mq is not on
 * the npm registry reachable here). Build glide-mq from its source with @valkey/valkey-glide standing
 * in for @glidemq/speedkey, then:
 *
 *   GLIDEMQ_PATH=/tmp/glide-build REDIS_URL=redis://127.0.0.1:6379 npx tsx packages/glidemq-valkey/interop/glidemq-interop.ts
 *   GLIDEMQ_PATH=/tmp/glide-build CLUSTER_NODES=127.0.0.1:7000,127.0.0.1:7001 npx tsx packages/glidemq-valkey/interop/glidemq-interop.ts
 *
 * The same jobs go through three pairings on three queues: glide-mq producer + glide-mq Worker (the
 * reference), glide-mq producer + Switchyard worker, Switchyard producer + glide-mq Worker. Then the
 * stalled-job recovery both ways. Every queue's keys are dumped and compared with the reference after
 * normalising what differs between runs (times, stream ids, consumer names, durations).
 */
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { Cluster, Redis } from "ioredis";
import {
  GlideConsumer,
  type GlideJobOptions,
  GlideProducer,
  GlideWorker,
  createGlideMqBackend,
  loadScripts,
  queueKeys,
} from "../src/index.js";

const glidePath = process.env.GLIDEMQ_PATH;
const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
if (!glidePath) throw new Error("set GLIDEMQ_PATH to a built glide-mq checkout (see the header of this file)");
// biome-ignore lint/suspicious/noExplicitAny: glide-mq is loaded at run time from a path, untyped
const glide = createRequire(import.meta.url)(glidePath) as any;
// CLUSTER_NODES=host:port,host:port,… runs everything against a Redis Cluster instead.
const clusterNodes = process.env.CLUSTER_NODES?.split(",").map((node) => {
  const [host, port] = node.split(":");
  return { host: host ?? "127.0.0.1", port: Number(port) };
});
const { hostname, port } = new URL(redisUrl);
const connection = clusterNodes ? { addresses: clusterNodes, clusterMode: true } : { addresses: [{ host: hostname, port: Number(port) }] };
const redis: Redis | Cluster = clusterNodes ? new Cluster(clusterNodes) : new Redis(redisUrl);
async function keysMatching(pattern: string): Promise<string[]> {
  const nodes = redis instanceof Cluster ? redis.nodes("master") : [redis];
  const found: string[] = [];
  for (const node of nodes) found.push(...(await node.keys(pattern)));
  return found;
}
const run = Date.now().toString(36);

/** The jobs of the main check: every producer feature the issue names, and every worker outcome. */
const JOBS: Array<{ name: string; data: unknown; opts?: GlideJobOptions }> = [
  { name: "plain", data: { n: 1 } },
  { name: "delayed", data: { n: 2 }, opts: { delay: 300 } },
  { name: "prioritized", data: { n: 3 }, opts: { priority: 3 } },
  { name: "lifo", data: { n: 4 }, opts: { lifo: true } },
  { name: "dedup", data: { n: 5 }, opts: { deduplication: { id: "D" } } },
  { name: "dedup", data: { n: 6 }, opts: { deduplication: { id: "D" } } },
  { name: "retried", data: { n: 7 }, opts: { attempts: 2, backoff: { type: "fixed", delay: 100 } } },
  { name: "failing", data: { n: 8 } },
  { name: "removed", data: { n: 9 }, opts: { removeOnComplete: true } },
  { name: "custom", data: { n: 10 }, opts: { jobId: "custom-1" } },
];
const behaviour = (name: string, attemptsMade: number): unknown => {
  if (name === "failing") throw new Error("always fails");
  if (name === "retried" && attemptsMade === 0) throw new Error("first try fails");
  return { done: name };
};
const until = async (what: string, check: () => Promise<boolean>, ms = 15_000) => {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};
const finished = (q: string) => async () =>
  (await redis.zcard(queueKeys(q).completed)) >= 7 && (await redis.zcard(queueKeys(q).failed)) >= 1;

async function addWithGlide(q: string): Promise<void> {
  const queue = new glide.Queue(q, { connection });
  for (const job of JOBS) await queue.add(job.name, job.data, job.opts);
  await queue.close();
}
async function addWithSwitchyard(q: string): Promise<void> {
  const producer = new GlideProducer(redis, q);
  for (const job of JOBS) await producer.add(job.name, job.data, job.opts);
}
async function processWithGlide(q: string, done: () => Promise<boolean>): Promise<void> {
  const worker = new glide.Worker(q, async (job: { name: string; attemptsMade: number }) => behaviour(job.name, job.attemptsMade), {
    connection,
    concurrency: 1,
    promotionInterval: 50,
    blockTimeout: 100,
  });
  worker.on("error", () => undefined);
  await until(`glide-mq worker on ${q}`, done);
  await worker.close();
}
async function processWithSwitchyard(q: string, done: () => Promise<boolean>): Promise<void> {
  const worker = new GlideWorker(redis, q, (job) => behaviour(job.name, job.attemptsMade), { promotionInterval: 50, blockTimeout: 100 });
  await worker.start();
  await until(`Switchyard worker on ${q}`, done);
  await worker.close();
}

/** The queue's keys with run-dependent values replaced: what must match between pairings. */
async function snapshot(q: string): Promise<Record<string, unknown>> {
  const base = queueKeys(q).base;
  const keys = (await keysMatching(`${base}*`)).filter((k) => !k.includes(":w:")).sort();
  const out: Record<string, unknown> = {};
  const norm = (v: string) => v.replace(/\b1\d{12}\b/g, "<T>").replace(/\b\d{13,}-\d+\b/g, "<E>");
  for (const key of keys) {
    const name = key.slice(base.length);
    const type = await redis.type(key);
    if (type === "hash") {
      const h = await redis.hgetall(key);
      if (name.startsWith("metrics:")) {
        // Counts only: a `:d` field appears only when a job took 1 ms or more, and buckets follow the clock.
        out[name] = Object.entries(h)
          .filter(([f]) => f.endsWith(":c"))
          .reduce((sum, [, v]) => sum + Number(v), 0);
        continue;
      }
      out[name] = Object.fromEntries(
        Object.entries(h)
          .map(([f, v]) => [f, norm(v)])
          .sort(),
      );
    } else if (type === "zset") {
      out[name] = (await redis.zrange(key, 0, -1)).sort();
    } else if (type === "list") {
      out[name] = await redis.lrange(key, 0, -1);
    } else if (type === "string") {
      out[name] = await redis.get(key);
    } else if (type === "stream") {
      const entries = await redis.xrange(key, "-", "+");
      if (name === "events") {
        // Events per job, in order: the interleaving between jobs depends on timing, a job's own sequence does not.
        const perJob: Record<string, string[]> = {};
        for (const [, f] of entries) {
          const jobId = f[f.indexOf("jobId") + 1] ?? "";
          const extra = f.filter((_, i) => i >= 4).map(norm);
          const list = perJob[jobId] ?? [];
          list.push([f[1], ...extra].join(" "));
          perJob[jobId] = list;
        }
        out[name] = perJob;
      } else {
        out[name] = { length: entries.length };
      }
    }
  }
  return out;
}

async function stalled(q: string, hangWith: "glide" | "switchyard"): Promise<Record<string, unknown>> {
  if (hangWith === "glide") {
    await new glide.Queue(q, { connection }).add("long", { n: 1 });
    const hung = new glide.Worker(q, () => new Promise(() => undefined), {
      connection,
      lockDuration: 1000,
      stalledInterval: 30_000,
      blockTimeout: 100,
    });
    hung.on("error", () => undefined);
    await until("the job to be active", async () => (await redis.hget(queueKeys(q).job("1"), "state")) === "active");
    await hung.close(true); // a crash: no heartbeat, the job stays active
    await processWithSwitchyardStalls(q);
  } else {
    await new GlideProducer(redis, q).add("long", { n: 1 });
    const consumer = new GlideConsumer(redis, q);
    await consumer.init();
    assert.equal((await consumer.reserve())[0]?.id, "1");
    await consumer.unregister(); // then never heard from again
    const worker = new glide.Worker(q, async () => ({ done: "long" }), {
      connection,
      lockDuration: 1000,
      stalledInterval: 1000,
      blockTimeout: 100,
    });
    worker.on("error", () => undefined);
    await until("recovery by glide-mq", async () => (await redis.hget(queueKeys(q).job("1"), "state")) === "completed");
    await worker.close();
  }
  return snapshot(q);
}
async function processWithSwitchyardStalls(q: string): Promise<void> {
  const worker = new GlideWorker(redis, q, () => ({ done: "long" }), { lockDuration: 1000, stalledInterval: 1000, blockTimeout: 100 });
  await worker.start();
  await until("recovery by Switchyard", async () => (await redis.hget(queueKeys(q).job("1"), "state")) === "completed");
  await worker.close();
}

/** The core Backend in front of glide-mq: what it enqueues a glide-mq Worker runs, and the reverse. */
async function backendBothWays(): Promise<void> {
  const backend = createGlideMqBackend({ redis });
  const toGlide = `ix-be1-${run}`;
  const a = await backend.enqueue(toGlide, { name: "core-plain", data: { n: 1 } });
  const b = await backend.enqueue(toGlide, { name: "core-urgent", data: { n: 2 }, priority: 10 });
  const c = await backend.enqueue(toGlide, { name: "core-later", data: { n: 3 }, delay: 200 });
  const d = await backend.enqueue(toGlide, { name: "retried", data: { n: 4 }, maxAttempts: 2, backoff: { type: "fixed", delay: 50 } });
  const e = await createGlideMqBackend({ redis, useGlideFunctions: true }).enqueue(toGlide, {
    name: "via-fcall",
    data: { n: 5 },
    uniqueKey: "u",
  });
  const order: string[] = [];
  const worker = new glide.Worker(
    toGlide,
    async (job: { id: string; name: string; attemptsMade: number }) => {
      order.push(job.id);
      return behaviour(job.name, job.attemptsMade);
    },
    { connection, concurrency: 1, promotionInterval: 50, blockTimeout: 100 },
  );
  worker.on("error", () => undefined);
  await until("glide-mq to run the Backend's jobs", async () => (await redis.zcard(queueKeys(toGlide).completed)) === 5);
  await worker.close();
  for (const { job } of [a, b, c, d, e]) assert.equal((await backend.get(toGlide, job.id))?.state, "completed");
  assert.equal((await backend.get(toGlide, d.job.id))?.attempts, 2);
  assert.equal(order[0], b.job.id, "the prioritized job runs first under glide-mq");
  console.log("ok: jobs the core Backend enqueued (plain, priority, delay, retry) run under glide-mq's Worker");

  const fromGlide = `ix-be2-${run}`;
  const queue = new glide.Queue(fromGlide, { connection });
  await queue.add("g-low", { n: 1 });
  await queue.add("g-high", { n: 2 }, { priority: 1 });
  const [first] = await backend.reserve(fromGlide, { worker: "core-worker" });
  assert.equal(first?.name, "g-high");
  await backend.complete(fromGlide, first?.id ?? "", { worker: "core-worker", result: { via: "switchyard" } });
  const [second] = await backend.reserve(fromGlide, { worker: "core-worker" });
  await backend.fail(fromGlide, second?.id ?? "", { worker: "core-worker", error: { message: "nope" } });
  const seen = await queue.getJob(first?.id);
  assert.equal(await seen.getState(), "completed");
  assert.deepEqual(seen.returnvalue, { via: "switchyard" });
  assert.deepEqual(await queue.getJobCounts(), { waiting: 0, active: 0, delayed: 0, completed: 1, failed: 1 });
  await queue.close();
  console.log("ok: jobs glide-mq's Queue added are reserved, completed and failed through the core Backend; glide-mq reads the outcome");
}

async function main(): Promise<void> {
  await loadScripts(redis);
  const ref = `ix-ref-${run}`;
  const g2s = `ix-g2s-${run}`;
  const s2g = `ix-s2g-${run}`;
  await addWithGlide(ref);
  await processWithGlide(ref, finished(ref));
  await addWithGlide(g2s);
  await processWithSwitchyard(g2s, finished(g2s));
  await addWithSwitchyard(s2g);
  await processWithGlide(s2g, finished(s2g));
  const [a, b, c] = [await snapshot(ref), await snapshot(g2s), await snapshot(s2g)];
  assert.deepEqual(b, a, "glide-mq producer + Switchyard worker differs from glide-mq alone");
  console.log("ok: jobs glide-mq added, processed by Switchyard: same keys as glide-mq alone");
  assert.deepEqual(c, a, "Switchyard producer + glide-mq worker differs from glide-mq alone");
  console.log("ok: jobs Switchyard added, processed by glide-mq's Worker: same keys as glide-mq alone");
  const viaFcall = `ix-fcall-${run}`;
  const fcallProducer = new GlideProducer(redis, viaFcall, { useGlideFunctions: true });
  for (const job of JOBS) await fcallProducer.add(job.name, job.data, job.opts);
  assert.equal(fcallProducer.usedGlideFunctions, true, "glide-mq's library should be loaded here");
  await processWithSwitchyard(viaFcall, finished(viaFcall));
  assert.deepEqual(await snapshot(viaFcall), a, "adding through FCALL glidemq_addJob/glidemq_dedup differs");
  console.log("ok: useGlideFunctions adds through glide-mq's own functions, same keys as glide-mq alone");
  const stalledBySwitchyard = await stalled(`ix-st1-${run}`, "glide");
  const stalledByGlide = await stalled(`ix-st2-${run}`, "switchyard");
  assert.deepEqual(stalledBySwitchyard, stalledByGlide, "stalled recovery differs between the two directions");
  assert.equal((stalledByGlide["job:1"] as Record<string, string>).stalledCount, "1");
  console.log("ok: stalled recovery, either way, leaves the same keys (stalledCount 1, `stalled` event)");
  await backendBothWays();
  console.log(JSON.stringify({ reference: a, stalled: stalledByGlide }, null, 1));
}

main()
  .then(async () => {
    await redis.quit();
    process.exit(0);
  })
  .catch(async (error) => {
    console.error(error);
    await redis.quit();
    process.exit(1);
  });
