import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestGateway, openTestGateway, until } from "./helpers.js";

let t: TestGateway;
beforeAll(async () => {
  t = await openTestGateway();
});
afterAll(async () => {
  await t.cleanup();
});

let counter = 0;
const queue = () => `native-${process.pid}-${++counter}`;

async function enqueue(q: string, body: Record<string, unknown> = { name: "Resize", data: { n: 1 } }) {
  const res = await t.request("POST", `/v1/queues/${q}/jobs`, body);
  expect(res.status).toBe(201);
  return res.json.job;
}

async function reserveOne(q: string, worker = "w1") {
  const res = await t.request("POST", `/v1/queues/${q}/reserve`, { worker });
  expect(res.status).toBe(200);
  expect(res.json.jobs).toHaveLength(1);
  return res.json.jobs[0];
}

describe("native /v1 door", () => {
  it("POST /v1/queues/:queue/jobs answers 201 {job, created} and writes a pending row", async () => {
    const q = queue();
    const res = await t.request("POST", `/v1/queues/${q}/jobs`, { name: "Resize", data: { size: 3 } });
    expect(res.status).toBe(201);
    expect(res.json.created).toBe(true);
    expect(res.json.job).toMatchObject({ queue: q, name: "Resize", data: { size: 3 }, state: "waiting" });
    const row = t.nativeRows().find((r) => String(r.id) === res.json.job.id);
    expect(row).toMatchObject({ name: "Resize", status: "pending" });
  });

  it("POST /v1/queues/:queue/jobs with a uniqueKey in use returns the first job with created=false", async () => {
    const q = queue();
    const first = await t.request("POST", `/v1/queues/${q}/jobs`, { name: "Once", uniqueKey: "k1" });
    const second = await t.request("POST", `/v1/queues/${q}/jobs`, { name: "Once", uniqueKey: "k1" });
    if (!t.gateway.backends.get("main")!.backend.capabilities.uniqueKeys) {
      expect(first.status).toBe(501);
      return;
    }
    expect(second.status).toBe(201);
    expect(second.json).toMatchObject({ created: false, job: { id: first.json.job.id } });
  });

  it("POST /v1/queues/:queue/jobs/bulk answers 201 with one result per job, in order", async () => {
    const q = queue();
    const res = await t.request("POST", `/v1/queues/${q}/jobs/bulk`, { jobs: [{ name: "A" }, { name: "B", data: [1] }] });
    expect(res.status).toBe(201);
    expect(res.json.results.map((r: { job: { name: string } }) => r.job.name)).toEqual(["A", "B"]);
    expect(res.json.results.every((r: { created: boolean }) => r.created)).toBe(true);
  });

  it("POST /v1/queues/:queue/reserve claims the job for the worker and the row turns processing", async () => {
    const q = queue();
    const job = await enqueue(q);
    const reserved = await reserveOne(q, "worker-a");
    expect(reserved).toMatchObject({ id: job.id, state: "active", attempts: 1, lease: { worker: "worker-a" } });
    const row = t.nativeRows().find((r) => String(r.id) === job.id);
    expect(["loading", "processing"]).toContain(row?.status);
    const empty = await t.request("POST", `/v1/queues/${q}/reserve`, { worker: "worker-a", count: 5 });
    expect(empty.json.jobs).toEqual([]);
  });

  it("POST .../reserve with wait parks until a job is enqueued and takes it at once; a wait over 30 s is refused", async () => {
    const q = queue();
    const waiting = t.request("POST", `/v1/queues/${q}/reserve`, { worker: "patient", wait: 10_000 });
    await until(() => t.gateway.wakeups.parked(q) === 1, "the reserve to park");
    const job = await enqueue(q);
    const reserved = await waiting;
    expect(reserved.json.jobs).toMatchObject([{ id: job.id, lease: { worker: "patient" } }]);
    expect(t.gateway.wakeups.parked(q)).toBe(0);
    const tooLong = await t.request("POST", `/v1/queues/${q}/reserve`, { worker: "w", wait: 30_001 });
    expect(tooLong.status).toBe(400);
    expect(tooLong.json.error.message).toContain("wait");
  });

  it("POST .../heartbeat extends the lease of its holder and refuses another worker with 409 LEASE_LOST", async () => {
    const q = queue();
    await enqueue(q);
    const reserved = await reserveOne(q, "w1");
    const res = await t.request("POST", `/v1/queues/${q}/jobs/${reserved.id}/heartbeat`, { worker: "w1", leaseMs: 120_000 });
    expect(res.status).toBe(200);
    expect(res.json.job.lease.expiresAt).toBeGreaterThan(reserved.lease.expiresAt);
    const other = await t.request("POST", `/v1/queues/${q}/jobs/${reserved.id}/heartbeat`, { worker: "w2" });
    expect(other.status).toBe(409);
    expect(other.json.error.code).toBe("LEASE_LOST");
  });

  it("POST .../complete completes an active job (body optional); completing it again is 409 INVALID_STATE", async () => {
    const q = queue();
    await enqueue(q);
    const reserved = await reserveOne(q);
    const res = await t.request("POST", `/v1/queues/${q}/jobs/${reserved.id}/complete`);
    expect(res.status).toBe(200);
    expect(res.json.job.state).toBe("completed");
    expect(t.nativeRows().find((r) => String(r.id) === reserved.id)?.status).toBe("complete");
    const again = await t.request("POST", `/v1/queues/${q}/jobs/${reserved.id}/complete`, { worker: "w1" });
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe("INVALID_STATE");
  });

  it("POST .../complete with next claims the worker's next job in the same call; without worker it is a 400 and nothing moves", async () => {
    const q = queue();
    const first = await enqueue(q);
    const second = await enqueue(q);
    await reserveOne(q, "w1");
    const refused = await t.request("POST", `/v1/queues/${q}/jobs/${first.id}/complete`, { next: {} });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.json)).toContain("next needs worker");
    expect(t.nativeRows().find((r) => String(r.id) === first.id)?.status).toBe("processing");
    const res = await t.request("POST", `/v1/queues/${q}/jobs/${first.id}/complete`, { worker: "w1", result: 1, next: { count: 2 } });
    expect(res.status).toBe(200);
    expect(res.json.job).toMatchObject({ id: first.id, state: "completed" });
    expect(
      res.json.next.map((job: { id: string; state: string; lease: { worker: string } }) => [job.id, job.state, job.lease.worker]),
    ).toEqual([[second.id, "active", "w1"]]);
    const rows = t.nativeRows();
    expect(rows.find((r) => String(r.id) === first.id)?.status).toBe("complete");
    expect(rows.find((r) => String(r.id) === second.id)?.status).toBe("processing");
    const last = await t.request("POST", `/v1/queues/${q}/jobs/${second.id}/complete`, { worker: "w1", next: {} });
    expect(last.json).toMatchObject({ job: { id: second.id, state: "completed" }, next: [] });
  });

  it("POST .../fail with retry=false fails the job for good and the row turns error", async () => {
    const q = queue();
    await enqueue(q);
    const reserved = await reserveOne(q);
    const res = await t.request("POST", `/v1/queues/${q}/jobs/${reserved.id}/fail`, {
      worker: "w1",
      error: { message: "boom" },
      retry: false,
    });
    expect(res.status).toBe(200);
    expect(res.json.job).toMatchObject({ state: "failed", error: { message: "boom" } });
    expect(t.nativeRows().find((r) => String(r.id) === reserved.id)?.status).toBe("error");
  });

  it("POST .../fail without retry=false puts the job back for another attempt while attempts remain", async () => {
    const q = queue();
    await enqueue(q, { name: "Flaky", maxAttempts: 2 });
    const reserved = await reserveOne(q);
    const res = await t.request("POST", `/v1/queues/${q}/jobs/${reserved.id}/fail`, { worker: "w1", error: { message: "try again" } });
    expect(res.status).toBe(200);
    expect(["waiting", "delayed"]).toContain(res.json.job.state);
    expect(res.json.job.attempts).toBe(1);
    const again = await reserveOne(q, "w2");
    expect(again).toMatchObject({ id: reserved.id, attempts: 2 });
  });

  it("POST .../complete naming a worker that does not hold the lease is 409 LEASE_LOST and the job stays active", async () => {
    const q = queue();
    await enqueue(q);
    const reserved = await reserveOne(q, "holder");
    const res = await t.request("POST", `/v1/queues/${q}/jobs/${reserved.id}/complete`, { worker: "intruder" });
    expect(res.status).toBe(409);
    expect(res.json.error.code).toBe("LEASE_LOST");
    expect((await t.request("GET", `/v1/queues/${q}/jobs/${reserved.id}`)).json.job.state).toBe("active");
  });

  it("DELETE /v1/queues/:queue/jobs/:id cancels a waiting job with 204; the job is no longer reservable", async () => {
    const q = queue();
    const job = await enqueue(q);
    const res = await t.request("DELETE", `/v1/queues/${q}/jobs/${job.id}`);
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
    const reserve = await t.request("POST", `/v1/queues/${q}/reserve`, { worker: "w1" });
    expect(reserve.json.jobs).toEqual([]);
    const missing = await t.request("DELETE", `/v1/queues/${q}/jobs/999999999`);
    expect(missing.status).toBe(404);
  });

  it("GET /v1/queues/:queue/jobs/:id reads a job; an unknown id is 404 {error:{code,message}}", async () => {
    const q = queue();
    const job = await enqueue(q, { name: "Read", data: ["x"] });
    const res = await t.request("GET", `/v1/queues/${q}/jobs/${job.id}`);
    expect(res.status).toBe(200);
    expect(res.json.job).toMatchObject({ id: job.id, name: "Read", data: ["x"] });
    const missing = await t.request("GET", `/v1/queues/${q}/jobs/999999999`);
    expect(missing.status).toBe(404);
    expect(missing.json.error).toMatchObject({ code: "NOT_FOUND", message: expect.stringContaining("999999999") });
  });

  it("GET /v1/queues/:queue/jobs?state=&limit= pages with a cursor until it is null", async () => {
    const q = queue();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await enqueue(q, { name: `J${i}` })).id);
    const first = await t.request("GET", `/v1/queues/${q}/jobs?state=waiting&limit=2`);
    expect(first.status).toBe(200);
    expect(first.json.jobs).toHaveLength(2);
    expect(typeof first.json.cursor).toBe("string");
    const second = await t.request("GET", `/v1/queues/${q}/jobs?state=waiting&limit=2&cursor=${encodeURIComponent(first.json.cursor)}`);
    expect(second.json.jobs).toHaveLength(1);
    expect(second.json.cursor).toBeNull();
    const seen = [...first.json.jobs, ...second.json.jobs].map((j: { id: string }) => j.id).sort();
    expect(seen).toEqual([...ids].sort());
  });

  it("GET /v1/queues/:queue/counts counts every state", async () => {
    const q = queue();
    await enqueue(q);
    await enqueue(q);
    await reserveOne(q);
    const res = await t.request("GET", `/v1/queues/${q}/counts`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ queue: q, counts: { waiting: 1, active: 1, completed: 0, failed: 0 } });
  });

  it("GET /v1/queues lists the queues with the backend each is routed to", async () => {
    const q = queue();
    await enqueue(q);
    const res = await t.request("GET", "/v1/queues");
    expect(res.status).toBe(200);
    expect(res.json.queues).toContainEqual({ name: q, backend: "main" });
  });

  it("POST /v1/queues/:queue/pause stops reserve until /resume", async () => {
    const q = queue();
    await enqueue(q);
    const paused = await t.request("POST", `/v1/queues/${q}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.json).toEqual({ queue: q, paused: true });
    const none = await t.request("POST", `/v1/queues/${q}/reserve`, { worker: "w1" });
    expect(none.json.jobs).toEqual([]);
    const resumed = await t.request("POST", `/v1/queues/${q}/resume`);
    expect(resumed.json).toEqual({ queue: q, paused: false });
    await reserveOne(q);
  });
});

describe("documents and health", () => {
  it("GET /openapi.json is an OpenAPI 3.1 document listing every /v1 route, and every $ref resolves", async () => {
    const res = await t.request("GET", "/openapi.json");
    expect(res.status).toBe(200);
    const doc = res.json;
    expect(doc.openapi).toBe("3.1.0");
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(operations).toEqual(
      expect.arrayContaining([
        "GET /v1/queues",
        "POST /v1/queues/{queue}/jobs",
        "POST /v1/queues/{queue}/jobs/bulk",
        "POST /v1/queues/{queue}/reserve",
        "POST /v1/queues/{queue}/jobs/{id}/heartbeat",
        "POST /v1/queues/{queue}/jobs/{id}/complete",
        "POST /v1/queues/{queue}/jobs/{id}/fail",
        "DELETE /v1/queues/{queue}/jobs/{id}",
        "GET /v1/queues/{queue}/jobs/{id}",
        "GET /v1/queues/{queue}/jobs",
        "GET /v1/queues/{queue}/counts",
        "POST /v1/queues/{queue}/pause",
        "POST /v1/queues/{queue}/resume",
        "GET /health",
      ]),
    );
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    expect(refs.length).toBeGreaterThan(10);
    for (const ref of refs) {
      const name = ref.slice('"$ref":"#/components/schemas/'.length, -1);
      expect(doc.components.schemas[name], ref).toBeDefined();
    }
    expect(doc.components.schemas.EnqueueInput.required).toEqual(["name"]);
  });

  it("GET /docs is the API reference page, every asset it loads served by the gateway itself (no outside network)", async () => {
    const res = await t.request("GET", "/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.text).not.toMatch(/(src|href)="(https?:)?\/\//);
    const assets = [...res.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1] as string);
    expect(assets.length).toBeGreaterThanOrEqual(3);
    for (const asset of assets) {
      const loaded = await t.request("GET", asset);
      expect(loaded.status, asset).toBe(200);
      expect(loaded.headers.get("content-type"), asset).toMatch(/css|javascript|image/);
    }
    const init = await t.request("GET", "/docs/assets/init.js");
    expect(init.text).toContain('"/openapi.json"');
    expect((await t.request("GET", "/docs/assets/..%2Fpackage.json")).status).toBe(404);
  });

  it("GET /health answers 200 when every backend answers and 503 once one does not", async () => {
    const own = await openTestGateway();
    const ok = await own.request("GET", "/health");
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ status: "ok", backends: { main: { ok: true } } });
    await own.gateway.backends.get("main")!.backend.close();
    const down = await own.request("GET", "/health");
    expect(down.status).toBe(503);
    expect(down.json).toMatchObject({ status: "unavailable", backends: { main: { ok: false } } });
    await own.cleanup();
  });
});

describe("methods a route does not answer", () => {
  it("an existing path with another method is 405 with Allow listing the methods it answers", async () => {
    const res = await t.request("PUT", "/v1/queues/jobs.a/jobs");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD, POST");
    expect(res.json.error.code).toBe("METHOD_NOT_ALLOWED");
    const job = await t.request("PATCH", "/v1/queues/jobs.a/jobs/1");
    expect(job.status).toBe(405);
    expect(job.headers.get("allow")).toBe("DELETE, GET, HEAD");
  });

  it("a path no route has is still 404", async () => {
    expect((await t.request("PUT", "/v1/nowhere/at/all")).status).toBe(404);
  });
});
