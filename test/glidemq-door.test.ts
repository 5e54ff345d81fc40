import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { type Gateway, createGateway } from "@switchyard/gateway";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreName, type StoreUnderTest, openStore } from "./matrix-backends.js";

/**
 * The glide-mq door (/glidemq): the request/response pairs recorded from glide-mq 0.15.4's own proxy
 * replayed on a glidemq-valkey store, the glide-mq store's own keys read alongside, bad input on
 * every route, and the door over every other backend.
 */

interface SampleStep {
  name: string;
  method: string;
  path: string;
  body?: unknown;
  rawBody?: string;
  capture?: Record<string, string>;
  sse?: boolean;
  status: number;
  contentType: string;
  response: unknown;
}
const SAMPLE = JSON.parse(readFileSync(new URL("../../shared/golden/glidemq-proxy/sample.json", import.meta.url), "utf8")) as {
  steps: SampleStep[];
};

interface Reply {
  status: number;
  contentType: string;
  // biome-ignore lint/suspicious/noExplicitAny: bodies are compared field by field.
  json: any;
}

function caller(gateway: () => Gateway) {
  return async (method: string, path: string, body?: unknown, raw?: string): Promise<Reply> => {
    const init: RequestInit = { method };
    if (body !== undefined || raw !== undefined) {
      init.body = raw ?? JSON.stringify(body);
      init.headers = { "content-type": "application/json" };
    }
    const res = await gateway().app.request(path, init);
    const text = await res.text();
    return { status: res.status, contentType: res.headers.get("content-type") ?? "", json: text === "" ? undefined : JSON.parse(text) };
  };
}

/** The recorded body with its placeholders (<T> time, <N> number) matched by kind, as the recording describes them. */
function expected(value: unknown): unknown {
  if (value === "<T>" || value === "<N>") return expect.any(Number);
  if (Array.isArray(value)) return value.map(expected);
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expected(v)]));
  return value;
}

/** Reads an SSE body until it holds `length` characters (or 3 s pass), then stops. */
async function readEvents(res: Response, length: number): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const deadline = Date.now() + 3_000;
  while (text.length < length && Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value);
  }
  await reader.cancel();
  return text;
}

/**
 * A job added through the glide-mq door is taken through the Cloudq door and through the qless door,
 * and a job added through either of those is taken through the glide-mq worker routes.
 */
async function acrossDoors(call: ReturnType<typeof caller>, queue: string): Promise<void> {
  const viaGlide = async (name: string, data: unknown) => (await call("POST", `/glidemq/queues/${queue}/jobs`, { name, data })).json.id;
  const cloudqJob = await viaGlide("Mailer", ["a@example.org", 2]);
  const fromCloudq = await call("GET", `/cloudq/${queue}`);
  expect(fromCloudq.json).toMatchObject({ klass: "Mailer", args: ["a@example.org", 2], id: cloudqJob });
  expect((await call("DELETE", `/cloudq/${queue}/${cloudqJob}`)).status).toBe(200);

  const qlessJob = await viaGlide("Report", { month: 11 });
  const popped = await call("POST", "/qless/pop", { queue, args: [queue, "ql-worker", 1] });
  expect(popped.status).toBe(200);
  const [job] = popped.json.reply as Array<{ jid: string; klass: string; data: string }>;
  expect({ jid: job?.jid, klass: job?.klass, data: JSON.parse(job?.data ?? "null") }).toEqual({
    jid: qlessJob,
    klass: "Report",
    data: { month: 11 },
  });
  expect((await call("POST", "/qless/complete", { queue, args: [qlessJob, "ql-worker", queue, "{}"] })).status).toBe(200);

  await call("POST", `/cloudq/${queue}`, { job: { klass: "FromCloudq", args: [1] } });
  const [taken] = (await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "http-worker" })).json.jobs;
  expect(taken).toMatchObject({ name: "FromCloudq", data: [1], state: "active" });
  const done = await call("POST", `/glidemq/queues/${queue}/jobs/${taken.id}/complete`, { worker: "http-worker" });
  expect(done.status).toBe(200);
}

describe("glide-mq door on a glidemq-valkey store: glide-mq 0.15.4's proxy recording", () => {
  const store = openStore("glidemq", 9);
  let gateway: Gateway;
  const call = caller(() => gateway);
  beforeAll(async () => {
    gateway = await createGateway({ config: { backends: { main: store.spec } }, env: {} });
  });
  afterAll(async () => {
    await gateway?.close();
    await store.dispose();
  });

  it("answers every recorded step with the recorded status, content type and body", async () => {
    const queue = store.track(`gp${randomUUID().slice(0, 8)}`);
    const captured: Record<string, string> = {};
    const fill = (path: string) => path.replaceAll("{Q}", queue).replace(/\{(\w+)\}/g, (_, name: string) => captured[name] ?? name);
    for (const step of SAMPLE.steps) {
      const path = `/glidemq${fill(step.path)}`;
      if (step.sse) {
        const res = await gateway.app.request(path);
        expect(res.status, step.name).toBe(step.status);
        expect(res.headers.get("content-type"), step.name).toContain(step.contentType);
        const recorded = String(step.response);
        const text = (await readEvents(res, recorded.length + 200)).replace(/^id: \d+-\d+$/gm, "id: <E>");
        expect(text.startsWith(recorded), `${step.name}: ${text}`).toBe(true);
        continue;
      }
      const reply = await call(step.method, path, step.body, step.rawBody);
      expect({ step: step.name, status: reply.status }).toEqual({ step: step.name, status: step.status });
      expect(reply.contentType, step.name).toContain(step.contentType);
      expect(reply.json, step.name).toEqual(expected(step.response));
      for (const [name, field] of Object.entries(step.capture ?? {})) captured[name] = String(reply.json[field]);
    }
    // The store holds what glide-mq's proxy left: the promoted job on the priority list, job 4 in its band.
    expect(await store.nativeState(queue, captured.delayed!)).toBe("waiting");
    expect(await store.nativeState(queue, "4")).toBe("prioritized");
    expect(await store.nativeState(queue, captured.jobA!)).toBe("failed");
  });

  it("an add through the door leaves the keys glide-mq's own Queue.add leaves (golden trace 01-plain-add)", async () => {
    const golden = JSON.parse(readFileSync(new URL("../../shared/golden/glide-mq/01-plain-add.json", import.meta.url), "utf8"));
    const [first] = golden.steps as Array<{ step: { name: string; data: unknown }; keys: Record<string, { value: unknown }> }>;
    const queue = store.track(`gl${randomUUID().slice(0, 8)}`);
    const added = await call("POST", `/glidemq/queues/${queue}/jobs`, { name: first!.step.name, data: first!.step.data });
    expect(added.json.id).toBe("1");
    const redis = new Redis(store.spec.url);
    try {
      const hash = await redis.hgetall(`glide:{${queue}}:job:1`);
      expect({ ...hash, timestamp: "<T>" }).toEqual({ ...(first!.keys["glide:{golden}:job:1"]!.value as object), timestamp: "<T>" });
      const [[, fields] = ["", []]] = await redis.xrange(`glide:{${queue}}:events`, "-", "+");
      expect(fields).toEqual(["event", "added", "jobId", "1", "name", first!.step.name]);
    } finally {
      redis.disconnect();
    }
  });

  it("a job added through the glide-mq door is taken through the Cloudq and qless doors, and the reverse", async () => {
    await acrossDoors(call, store.track(`gc${randomUUID().slice(0, 8)}`));
  });

  it("a job reserved through the worker routes is active to glide-mq, and completes with its return value", async () => {
    const queue = store.track(`gw${randomUUID().slice(0, 8)}`);
    const added = await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "resize", data: { w: 10 } });
    expect(added.status).toBe(201);
    const reserved = await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "py-1", lockDuration: 5_000 });
    expect(reserved.json.jobs).toEqual([expect.objectContaining({ id: added.json.id, state: "active", data: { w: 10 } })]);
    expect(await store.nativeState(queue, added.json.id)).toBe("active");
    expect((await call("GET", `/glidemq/queues/${queue}/counts`)).json).toMatchObject({ active: 1, waiting: 0 });
    const listed = await call("GET", `/glidemq/queues/${queue}/jobs?state=active`);
    expect(listed.json.jobs.map((job: { id: string }) => job.id)).toEqual([added.json.id]);

    const beat = await call("POST", `/glidemq/queues/${queue}/jobs/${added.json.id}/heartbeat`, { worker: "py-1", progress: 50 });
    expect(beat.json).toMatchObject({ state: "active", progress: 50 });
    const stolen = await call("POST", `/glidemq/queues/${queue}/jobs/${added.json.id}/complete`, { worker: "other" });
    expect(stolen.status).toBe(409);
    expect(stolen.json).toEqual({ error: expect.any(String) });
    const done = await call("POST", `/glidemq/queues/${queue}/jobs/${added.json.id}/complete`, { worker: "py-1", returnvalue: { ok: 1 } });
    expect(done.json).toMatchObject({ state: "completed", returnvalue: { ok: 1 }, finishedOn: expect.any(Number) });
    expect(await store.nativeState(queue, added.json.id)).toBe("completed");
  });

  it("a failed job retries by its attempts and backoff, then fails; retry puts it back; clean removes it", async () => {
    const queue = store.track(`gf${randomUUID().slice(0, 8)}`);
    const added = await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "flaky", opts: { attempts: 2 } });
    const id = added.json.id as string;
    const fail = async () => {
      const [job] = (await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w" })).json.jobs;
      expect(job?.id).toBe(id);
      return call("POST", `/glidemq/queues/${queue}/jobs/${id}/fail`, { worker: "w", failedReason: "boom" });
    };
    // glide-mq retries through `scheduled` (delayed, due at once without a backoff).
    expect((await fail()).json).toMatchObject({ state: "delayed", attemptsMade: 1, failedReason: "boom" });
    expect((await fail()).json).toMatchObject({ state: "failed", attemptsMade: 2 });
    expect((await call("POST", `/glidemq/queues/${queue}/retry`, {})).json).toEqual({ retried: 1 });
    expect(await store.nativeState(queue, id)).toBe("delayed");
    const promoted = await call("POST", `/glidemq/queues/${queue}/jobs/${id}/promote`);
    expect(promoted.json).toEqual({ promoted: true });
    expect(await call("POST", `/glidemq/queues/${queue}/jobs/${id}/promote`)).toMatchObject({ status: 409 });
    await call("POST", `/glidemq/queues/${queue}/jobs/${id}/revoke`);
    const cleaned = await call("DELETE", `/glidemq/queues/${queue}/clean?state=failed&age=0`);
    expect(cleaned.json).toEqual({ removed: [id] });
    expect(await store.nativeState(queue, id)).toBeNull();
  });

  it("rate limit, metrics and workers are glide-mq's own keys: meta fields, metrics buckets, the w: registry", async () => {
    const queue = store.track(`gr${randomUUID().slice(0, 8)}`);
    const q = `/glidemq/queues/${queue}`;
    expect((await call("GET", `${q}/rate-limit`)).json).toEqual({ rateLimit: null });
    expect((await call("PUT", `${q}/rate-limit`, { max: 10, duration: 1000 })).json).toEqual({ rateLimit: { duration: 1000, max: 10 } });
    expect((await call("PUT", `${q}/rate-limit`, { max: 0 })).json).toEqual({
      error: "Body must include positive numeric fields: max, duration",
    });
    const redis = new Redis(store.spec.url);
    try {
      expect(await redis.hmget(`glide:{${queue}}:meta`, "rateLimitMax", "rateLimitDuration")).toEqual(["10", "1000"]);
      expect((await call("GET", `${q}/rate-limit`)).json).toEqual({ rateLimit: { max: 10, duration: 1000 } });
      expect((await call("DELETE", `${q}/rate-limit`)).json).toEqual({ removed: true, rateLimit: null });
      expect(await redis.hexists(`glide:{${queue}}:meta`, "rateLimitMax")).toBe(0);

      const { id } = (await call("POST", `${q}/jobs`, { name: "m" })).json;
      await call("POST", `${q}/jobs/reserve`, { worker: "w" });
      await call("POST", `${q}/jobs/${id}/complete`, { worker: "w" });
      const metrics = (await call("GET", `${q}/metrics?type=completed`)).json;
      expect(metrics).toEqual({
        count: 1,
        data: [{ timestamp: expect.any(Number), count: 1, avgDuration: expect.any(Number) }],
        meta: { resolution: "minute" },
      });
      expect((await call("GET", `${q}/metrics`)).json).toEqual({ error: "Missing required query param: type" });

      const startedAt = Date.now() - 5_000;
      await redis.set(`glide:{${queue}}:w:worker-1`, JSON.stringify({ addr: "10.0.0.1", pid: 42, startedAt, activeJobs: 2 }), "PX", 60_000);
      await redis.set(`glide:{${queue}}:w:broken`, "not json", "PX", 60_000);
      const workers = (await call("GET", `${q}/workers`)).json.workers;
      expect(workers).toEqual([{ id: "worker-1", addr: "10.0.0.1", pid: 42, startedAt, age: expect.any(Number), activeJobs: 2 }]);
      expect(workers[0].age).toBeGreaterThanOrEqual(5_000);
    } finally {
      redis.disconnect();
    }
  });

  it("job schedulers are read from glide-mq's schedulers hash and removed from it", async () => {
    const queue = store.track(`gs${randomUUID().slice(0, 8)}`);
    const q = `/glidemq/queues/${queue}`;
    const entry = { every: 60_000, nextRun: Date.now() + 60_000, iterationCount: 0, template: { name: "tick", data: {} } };
    const redis = new Redis(store.spec.url);
    try {
      await redis.hset(`glide:{${queue}}:schedulers`, "hourly", JSON.stringify(entry), "broken", "{not json");
      expect((await call("GET", `${q}/schedulers`)).json).toEqual({ schedulers: [{ name: "hourly", entry }] });
      expect((await call("GET", `${q}/schedulers/hourly`)).json).toEqual({ entry, name: "hourly" });
      expect(await call("GET", `${q}/schedulers/none`)).toMatchObject({ status: 404, json: { error: "Scheduler not found" } });
      expect((await call("DELETE", `${q}/schedulers/hourly`)).json).toEqual({ removed: true });
      expect(await redis.hexists(`glide:{${queue}}:schedulers`, "hourly")).toBe(0);
      expect(await call("DELETE", `${q}/schedulers/hourly`)).toMatchObject({ status: 404 });
    } finally {
      redis.disconnect();
    }
  });

  it("add and wait answers the return value, or 504 after waitTimeout", async () => {
    const queue = store.track(`gt${randomUUID().slice(0, 8)}`);
    const waiting = call("POST", `/glidemq/queues/${queue}/jobs/wait`, { name: "sum", data: [1, 2], opts: { waitTimeout: 10_000 } });
    let job: { id: string } | undefined;
    while (!job) job = (await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", wait: 1_000 })).json.jobs[0];
    await call("POST", `/glidemq/queues/${queue}/jobs/${job.id}/complete`, { worker: "w", returnvalue: 3 });
    expect(await waiting).toMatchObject({ status: 200, json: { result: 3 } });
    const late = await call("POST", `/glidemq/queues/${queue}/jobs/wait`, { name: "slow", opts: { waitTimeout: 200 } });
    expect(late).toMatchObject({ status: 504, json: { error: expect.stringContaining("did not finish within 200ms") } });
  });

  it("drain removes waiting jobs from the store, and delayed ones when asked", async () => {
    const queue = store.track(`gd${randomUUID().slice(0, 8)}`);
    await call("POST", `/glidemq/queues/${queue}/jobs/bulk`, { jobs: [{ name: "a" }, { name: "b", opts: { delay: 60_000 } }] });
    expect((await call("POST", `/glidemq/queues/${queue}/drain`)).json).toEqual({ delayed: false, drained: true });
    expect((await call("GET", `/glidemq/queues/${queue}/counts`)).json).toMatchObject({ waiting: 0, delayed: 1 });
    await call("POST", `/glidemq/queues/${queue}/drain?delayed=true`);
    expect((await call("GET", `/glidemq/queues/${queue}/counts`)).json).toMatchObject({ waiting: 0, delayed: 0 });
    expect(await store.countJobs(queue)).toBe(0);
  });

  it("refuses bad input on every route with a 4xx {error}, storing nothing", async () => {
    const queue = store.track(`gb${randomUUID().slice(0, 8)}`);
    const q = `/glidemq/queues/${queue}`;
    const cases: Array<[string, string, unknown?, string?]> = [
      ["POST", `${q}/jobs`, undefined, "{not json"],
      ["POST", `${q}/jobs`, { name: 5 }],
      ["POST", `${q}/jobs`, { name: "a", opts: { delay: -1 } }],
      ["POST", `${q}/jobs`, { name: "a", opts: { lifo: "yes" } }],
      ["POST", `${q}/jobs`, { name: "a", opts: { jobId: "a:b" } }],
      ["POST", `${q}/jobs`, { name: "a", data: "x".repeat(2 * 1024 * 1024) }],
      ["POST", `${q}/jobs/bulk`, { jobs: Array.from({ length: 1001 }, () => ({ name: "x" })) }],
      ["POST", `${q}/jobs/bulk`, { jobs: [{ name: "ok" }, { name: "bad", opts: { priority: -2 } }] }],
      ["POST", "/glidemq/queues/a:b/jobs", { name: "a" }],
      ["POST", "/glidemq/queues/%7Bq%7D/jobs", { name: "a" }],
      ["GET", `${q}/jobs?state=stuck`],
      ["GET", `${q}/jobs?state=waiting&start=x`],
      ["POST", `${q}/jobs/1/priority`, { priority: "high" }],
      ["POST", `${q}/jobs/1/delay`, {}],
      ["POST", `${q}/drain?delayed=maybe`],
      ["DELETE", `${q}/clean?state=failed`],
      ["POST", `${q}/jobs/reserve`, { worker: "" }],
      ["POST", `${q}/jobs/1/fail`, { worker: "w" }],
      ["GET", `${q}/jobs/..`],
    ];
    for (const [method, path, body, raw] of cases) {
      const reply = await call(method, path, body, raw);
      expect(reply.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
      expect(reply.status, `${method} ${path}`).toBeLessThan(500);
      expect(reply.json, `${method} ${path}`).toEqual({ error: expect.any(String) });
    }
    expect(await store.countJobs(queue)).toBe(0);
  });
});

const OTHER_STORES: Array<{ name: StoreName; redisDb?: number }> = [
  { name: "sqlite" },
  { name: "postgres" },
  { name: "mysql" },
  { name: "qless", redisDb: 10 },
  { name: "cloudq" },
];

for (const { name, redisDb } of OTHER_STORES) {
  describe(`glide-mq door over ${name}`, () => {
    let store: StoreUnderTest;
    let gateway: Gateway;
    const call = caller(() => gateway);
    beforeAll(async () => {
      store = openStore(name, redisDb);
      gateway = await createGateway({ config: { backends: { main: store.spec } }, env: {} });
    });
    afterAll(async () => {
      await gateway?.close();
      await store?.dispose();
    });
    const newQueue = () => store.track(`gx${randomUUID().slice(0, 8)}`);

    it("a job added through the glide-mq door is consumed through /v1, and one added through /v1 through the worker routes", async () => {
      const queue = newQueue();
      const added = await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "mail", data: { to: "a" }, opts: { attempts: 3 } });
      expect(added).toMatchObject({ status: 201, json: { id: expect.any(String), name: "mail", timestamp: expect.any(Number) } });
      const got = await call("GET", `/glidemq/queues/${queue}/jobs/${added.json.id}`);
      expect(got.json).toMatchObject({ id: added.json.id, state: "waiting", opts: { attempts: 3 }, data: { to: "a" }, attemptsMade: 0 });
      expect(await store.nativeState(queue, added.json.id)).not.toBeNull();
      const [job] = (await call("POST", `/v1/queues/${queue}/reserve`, { worker: "v1" })).json.jobs;
      expect(job).toMatchObject({ id: added.json.id, name: "mail", data: { to: "a" }, maxAttempts: 3 });
      await call("POST", `/v1/queues/${queue}/jobs/${job.id}/complete`, { worker: "v1", result: "sent" });

      const other = (await call("POST", `/v1/queues/${queue}/jobs`, { name: "v1-made", data: 7 })).json.job;
      const [taken] = (await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "go-1" })).json.jobs;
      expect(taken).toMatchObject({ id: other.id, name: "v1-made", data: 7, state: "active" });
      const done = await call("POST", `/glidemq/queues/${queue}/jobs/${other.id}/complete`, { worker: "go-1", returnvalue: "ok" });
      expect(done.json).toMatchObject({ state: "completed" });
      expect(await store.nativeState(queue, other.id)).toEqual(store.nativeStates.completed?.includes(null) ? null : expect.anything());
    });

    it("a job added through the glide-mq door is taken through the Cloudq and qless doors, and the reverse", async () => {
      await acrossDoors(call, newQueue());
    });

    it("counts, list, revoke, pause and drain through the Backend contract; glide-mq's own features answer 501 naming the backend", async () => {
      const queue = newQueue();
      const bulk = await call("POST", `/glidemq/queues/${queue}/jobs/bulk`, { jobs: [{ name: "a" }, { name: "b" }, { name: "c" }] });
      expect(bulk.status).toBe(201);
      const [first, second] = bulk.json.jobs as Array<{ id: string }>;
      expect((await call("POST", `/glidemq/queues/${queue}/jobs/${first!.id}/revoke`)).json).toEqual({ status: "revoked" });
      // A store that deletes a canceled job (qless) has no failed one to count.
      const kept = (await call("GET", `/v1/queues/${queue}/jobs/${first!.id}`)).status === 200;
      const counts = (await call("GET", `/glidemq/queues/${queue}/counts`)).json;
      expect(counts).toEqual({ waiting: 2, active: 0, delayed: 0, completed: 0, failed: kept ? 1 : 0 });
      const waiting = await call("GET", `/glidemq/queues/${queue}/jobs?state=waiting&start=1&end=1`);
      expect(waiting.json.jobs).toHaveLength(1);
      expect((await call("POST", `/glidemq/queues/${queue}/pause`)).json).toEqual({ paused: true });
      expect((await call("POST", `/glidemq/queues/${queue}/resume`)).json).toEqual({ paused: false });
      expect((await call("POST", `/glidemq/queues/${queue}/drain`)).json).toEqual({ delayed: false, drained: true });
      expect((await call("GET", `/glidemq/queues/${queue}/counts`)).json).toMatchObject({ waiting: 0 });
      const drained = await call("GET", `/glidemq/queues/${queue}/jobs/${second!.id}`);
      expect(drained).toMatchObject(kept ? { status: 200, json: { state: "failed" } } : { status: 404 });

      const kind = gateway.backends.get("main")!.backend.kind;
      for (const [method, path] of [
        ["GET", `/glidemq/queues/${queue}/dlq`],
        ["PUT", `/glidemq/queues/${queue}/rate-limit`],
        ["GET", `/glidemq/queues/${queue}/workers`],
        ["GET", `/glidemq/queues/${queue}/schedulers`],
        ["DELETE", `/glidemq/queues/${queue}/clean?state=completed&age=0`],
      ] as const) {
        const reply = await call(method, path, method === "PUT" ? { max: 1, duration: 1000 } : undefined);
        expect(reply.status, path).toBe(501);
        expect(reply.json.error, path).toContain(kind);
      }
    });

    it("priority, delay and promote change a job where the store can edit one, and answer 501 naming the backend where it cannot", async () => {
      const queue = newQueue();
      const added = await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "later", opts: { delay: 60_000 } });
      const id = added.json.id as string;
      const editing = gateway.backends.get("main")!.backend.capabilities.editing;
      const priority = await call("POST", `/glidemq/queues/${queue}/jobs/${id}/priority`, { priority: 1 });
      const promoted = await call("POST", `/glidemq/queues/${queue}/jobs/${id}/promote`);
      if (!editing) {
        expect(priority.status).toBe(501);
        expect(promoted.status).toBe(501);
        return;
      }
      expect(priority.json).toEqual({ priority: 1, updated: true });
      expect(promoted.json).toEqual({ promoted: true });
      const job = (await call("GET", `/glidemq/queues/${queue}/jobs/${id}`)).json;
      expect(job).toMatchObject({ state: "waiting" });
      expect((await call("GET", `/v1/queues/${queue}/jobs/${id}`)).json.job).toMatchObject({ priority: 2048, state: "waiting" });
    });
  });
}

describe("glide-mq door at the root (doors.glidemq.mountAtRoot)", () => {
  const store = openStore("sqlite");
  let gateway: Gateway;
  const call = caller(() => gateway);
  beforeAll(async () => {
    gateway = await createGateway({ config: { backends: { main: store.spec }, doors: { glidemq: { mountAtRoot: true } } }, env: {} });
  });
  afterAll(async () => {
    await gateway?.close();
    await store.dispose();
  });

  it("answers glide-mq's paths without a prefix, where glide-mq's HTTP producers expect them; /health stays the gateway's", async () => {
    const queue = store.track(`gr${randomUUID().slice(0, 8)}`);
    const added = await call("POST", `/queues/${queue}/jobs`, { name: "root", data: 1 });
    expect(added).toMatchObject({ status: 201, json: { id: expect.any(String), name: "root" } });
    expect((await call("GET", `/queues/${queue}/jobs/${added.json.id}`)).json).toMatchObject({ name: "root", data: 1, state: "waiting" });
    expect((await call("GET", `/glidemq/queues/${queue}/counts`)).json).toMatchObject({ waiting: 1 });
    expect((await call("GET", "/health")).json).toMatchObject({ status: "ok", backends: expect.any(Object) });
  });
});
