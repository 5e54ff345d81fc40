import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RunningServer, startServer } from "@switchyard/gateway";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PyOp, type PyResult, installQlessPy, qlessPy, qlessPyAsync } from "../packages/qless-redis/test/interop/qless-py.js";
import { redisUrl } from "./matrix-backends.js";
import { serviceUrl } from "./support/services.js";

/**
 * qless-py (PyPI 0.11.4, unmodified, with the qless-core it ships) pointed at the RESP door: the same
 * run of puts, pops, heartbeats, a retry, a failure and completions on a SQLite and a PostgreSQL
 * backend answers as it does on Redis itself, and a job put through /v1 is worked by qless-py too.
 */
const REDIS_DB = 12;
const BUNDLED = "bundled";
const unique = () => randomBytes(4).toString("hex");

/** One worker's run; `jid(name)` makes the run's jids unique on a shared Redis. */
function scenario(queue: string, v1Queue: string, jid: (name: string) => string, putV1Job: boolean): PyOp[] {
  const worker = "py-worker";
  return [
    { op: "put", queue, jid: jid("a"), klass: "tasks.Resize", data: { image: "cat.png" }, priority: 0, retries: 5 },
    { op: "put", queue, jid: jid("b"), klass: "tasks.Resize", data: { image: "dog.png" }, retries: 1 },
    ...(putV1Job ? [{ op: "put", queue: v1Queue, jid: jid("v1"), klass: "tasks.Resize", data: { image: "v1.png" }, retries: 5 }] : []),
    { op: "pop", queue, worker },
    { op: "heartbeat", jid: jid("a"), worker },
    { op: "complete", jid: jid("a"), worker },
    { op: "pop", queue, worker },
    { op: "retry", jid: jid("b"), worker },
    { op: "pop", queue, worker },
    { op: "fail", jid: jid("b"), worker, group: "resize-failed", message: "image is corrupt" },
    { op: "pop", queue: v1Queue, worker },
    { op: "complete", jid: jid("v1"), worker },
    { op: "pop", queue, worker },
    { op: "get", jid: jid("a") },
    { op: "get", jid: jid("b") },
    { op: "get", jid: jid("v1") },
  ];
}

/** What the run's results say, without what differs by nature (times, run suffixes, history's detail). */
function comparable(results: PyResult[], suffix: string): unknown[] {
  const strip = (value: unknown) => (typeof value === "string" ? value.replace(suffix, "") : value);
  return results.map(({ ok, error }) => {
    if (error !== undefined) return { error };
    if (ok === null || typeof ok !== "object") return typeof ok === "number" ? "a number" : strip(ok);
    const job = ok as Record<string, unknown>;
    const failure = job.failure as { group?: string; message?: string } | Record<string, never>;
    return {
      jid: strip(job.jid),
      klass: job.klass,
      queue: "queue",
      state: job.state,
      data: job.data,
      priority: job.priority,
      tags: job.tags,
      worker: job.worker,
      retries: job.retries,
      remaining: job.remaining,
      failure: failure && "group" in failure ? { group: failure.group, message: failure.message } : null,
    };
  });
}

async function gatewayOn(backend: { type: string; url: string; options?: Record<string, unknown> }): Promise<RunningServer> {
  return startServer({ config: { backends: { main: backend }, doors: { resp: { port: 0 } } }, port: 0, host: "127.0.0.1", env: {} });
}

let dir: string;
const servers: RunningServer[] = [];
let onRedis: unknown[];

beforeAll(async () => {
  installQlessPy();
  dir = mkdtempSync(join(tmpdir(), "switchyard-resp-py-"));
  const suffix = `-${unique()}`;
  const results = qlessPy(
    redisUrl(REDIS_DB),
    BUNDLED,
    scenario(`py-${unique()}`, `py-v1-${unique()}`, (name) => `${name}${suffix}`, true),
  );
  onRedis = comparable(results, suffix);
}, 120_000);
afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("qless-py over the RESP door", () => {
  it("the baseline on Redis worked every job (what the door runs are compared with)", () => {
    expect(onRedis.filter((result) => typeof result === "object" && result !== null && "error" in result)).toEqual([]);
    expect(onRedis.slice(-3).map((job) => (job as { state: string }).state)).toEqual(["complete", "failed", "complete"]);
  });

  for (const store of ["sqlite", "postgres"] as const) {
    it(`on ${store}: qless-py's run answers as on Redis, and it works a job put through /v1`, async () => {
      const url = store === "sqlite" ? `sqlite:${join(dir, "py.sqlite")}` : serviceUrl("postgres");
      const server = await gatewayOn({ type: "workerqueue-sql", url, options: { table: `resp_py_${unique()}` } });
      servers.push(server);
      const queue = `py-${unique()}`;
      const v1Queue = `py-v1-${unique()}`;
      const suffix = `-${unique()}`;
      const v1 = await fetch(`${server.url}/v1/queues/${v1Queue}/jobs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ id: `v1${suffix}`, name: "tasks.Resize", data: { image: "v1.png" }, maxAttempts: 6 }),
      });
      expect(v1.status).toBe(201);
      // Not the blocking qlessPy: the gateway answers from this very process.
      const results = await qlessPyAsync(
        `redis://127.0.0.1:${server.respPort}`,
        BUNDLED,
        scenario(queue, v1Queue, (name) => `${name}${suffix}`, false),
      );
      // The baseline put the /v1 job with qless-py: leave that put out of the comparison.
      expect(comparable(results, suffix)).toEqual(onRedis.filter((_, index) => index !== 2));
    });
  }

  it("on sqlite: qless-py's recurring job is kept by the store, its next run read from the door, its instances popped", async () => {
    const server = await gatewayOn({ type: "workerqueue-sql", url: `sqlite:${join(dir, "py-recur.sqlite")}` });
    servers.push(server);
    const [queue, jid] = [`py-recur-${unique()}`, `digest-${unique()}`];
    const before = Date.now() / 1000;
    const results = await qlessPyAsync(`redis://127.0.0.1:${server.respPort}`, BUNDLED, [
      { op: "recur", queue, klass: "tasks.Digest", data: { to: "ops" }, interval: 3600, jid },
      { op: "recurring", jid },
      { op: "pop", queue, worker: "py-worker" },
      { op: "recurring", jid },
      { op: "unrecur", jid },
      { op: "get", jid },
    ]);
    expect(results.map((result) => result.error)).toEqual(Array(6).fill(undefined));
    const [recurred, first, popped, second] = results.map((result) => result.ok) as Array<Record<string, unknown>>;
    expect(recurred).toBe(jid);
    expect(first).toMatchObject({ jid, klass: "tasks.Digest", queue, interval: 3600, count: 0, data: { to: "ops" } });
    expect(Number(first?.next)).toBeGreaterThanOrEqual(Math.floor(before));
    expect(popped).toMatchObject({ jid: `${jid}-1`, klass: "tasks.Digest", state: "running", data: { to: "ops" } });
    // qless counts the next run from the whole second the instance was due (check_recurring floors it).
    expect(second).toMatchObject({ count: 1 });
    expect(Number(second?.next)).toBe(Math.floor(Number(first?.next)) + 3600);
    expect(results[5]?.ok).toBeNull();
  });
});
