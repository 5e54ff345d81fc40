import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestGateway, openTestGateway, until } from "./helpers.js";

let counter = 0;
const queue = () => `cq-${process.pid}-${++counter}`;
const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}` });

/** The curl sequence of the protocol text (seeds/000, 001): publish to archive_queue, consume, delete. */
async function seedSequence(t: TestGateway, prefix: string, headers: Record<string, string> = {}) {
  const publish = await t.request("POST", `${prefix}/archive_queue`, '{ "job": {"klass": "Archive", "args": [{"data": "foobar"}]}}', {
    "content-type": "application/json",
    ...headers,
  });
  expect(publish.status).toBe(200);
  expect(publish.json).toEqual({ status: "success" });

  const consume = await t.request("GET", `${prefix}/archive_queue`, undefined, headers);
  expect(consume.status).toBe(200);
  expect(consume.json).toMatchObject({ klass: "Archive", args: [{ data: "foobar" }], id: expect.any(String) });
  expect(consume.json.job).toEqual({ klass: "Archive", args: [{ data: "foobar" }], id: consume.json.id });
  // Only Cloudq's own fields: the store's bookkeeping (native.workerqueue) is not a job key.
  expect(Object.keys(consume.json).sort()).toEqual(["args", "id", "job", "klass"]);
  const row = t.nativeRows().find((r) => String(r.id) === consume.json.id);
  expect(["loading", "processing"]).toContain(row?.status);

  const remove = await t.request("DELETE", `${prefix}/archive_queue/${consume.json.id}`, undefined, headers);
  expect(remove.status).toBe(200);
  expect(remove.json).toEqual({ status: "success" });
  expect(t.nativeRows().find((r) => String(r.id) === consume.json.id)?.status).toBe("complete");

  const again = await t.request("GET", `${prefix}/archive_queue`, undefined, headers);
  expect(again.status).toBe(200);
  expect(again.json).toEqual({ status: "empty" });
}

describe("Cloudq door at /cloudq", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await openTestGateway();
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it("runs the protocol's curl sequence: publish, consume, delete, then empty", async () => {
    await seedSequence(t, "/cloudq");
  });

  it("accepts the bare {klass,args} form, wraps non-array args in an array and keeps extra job keys", async () => {
    const q = queue();
    const bare = await t.request("POST", `/cloudq/${q}`, { klass: "WELCOME", args: ["to@email.com", "subject", "body"] });
    expect(bare.json).toEqual({ status: "success" });
    const scalar = await t.request("POST", `/cloudq/${q}`, { job: { klass: "Scalar", args: "solo", tenant: "acme" } });
    expect(scalar.json).toEqual({ status: "success" });

    const first = await t.request("GET", `/cloudq/${q}`);
    expect(first.json).toMatchObject({ klass: "WELCOME", args: ["to@email.com", "subject", "body"] });
    const second = await t.request("GET", `/cloudq/${q}`);
    expect(second.json).toMatchObject({ klass: "Scalar", args: ["solo"], tenant: "acme" });
    expect(second.json.job).toEqual({ klass: "Scalar", args: ["solo"], id: second.json.id });
    const stored = await t.request("GET", `/v1/queues/${q}/jobs/${second.json.id}`);
    expect(stored.json.job).toMatchObject({ name: "Scalar", data: ["solo"], native: { tenant: "acme" } });
  });

  it("reserves with the configured lease (default 300 s)", async () => {
    const q = queue();
    await t.request("POST", `/cloudq/${q}`, { job: { klass: "K", args: [] } });
    const before = Date.now();
    const got = await t.request("GET", `/cloudq/${q}`);
    const job = (await t.request("GET", `/v1/queues/${q}/jobs/${got.json.id}`)).json.job;
    expect(job.lease.expiresAt).toBeGreaterThanOrEqual(before + 299_000);
  });

  it("DELETE of a waiting job cancels it, and of an unknown id answers 404 {status:error}", async () => {
    const q = queue();
    await t.request("POST", `/cloudq/${q}`, { job: { klass: "K", args: [1] } });
    const [waiting] = (await t.request("GET", `/v1/queues/${q}/jobs?state=waiting`)).json.jobs;
    const res = await t.request("DELETE", `/cloudq/${q}/${waiting.id}`);
    expect(res.json).toEqual({ status: "success" });
    expect((await t.request("GET", `/cloudq/${q}`)).json).toEqual({ status: "empty" });
    const missing = await t.request("DELETE", `/cloudq/${q}/999999999`);
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ status: "error", message: expect.stringContaining("999999999") });
  });

  it("hands out a job enqueued through /v1 with non-array data as args [data], and nothing from a paused queue", async () => {
    const q = queue();
    await t.request("POST", `/v1/queues/${q}/jobs`, { name: "FromV1", data: { to: "a@b.c" } });
    await t.request("POST", `/v1/queues/${q}/pause`);
    expect((await t.request("GET", `/cloudq/${q}`)).json).toEqual({ status: "empty" });
    await t.request("POST", `/v1/queues/${q}/resume`);
    const got = await t.request("GET", `/cloudq/${q}`);
    expect(got.json).toMatchObject({ klass: "FromV1", args: [{ to: "a@b.c" }] });
  });

  it("DELETE completes a job another worker reserved through /v1 (Cloudq's DELETE names no worker)", async () => {
    const q = queue();
    await t.request("POST", `/v1/queues/${q}/jobs`, { name: "Shared" });
    const [job] = (await t.request("POST", `/v1/queues/${q}/reserve`, { worker: "v1-worker" })).json.jobs;
    expect((await t.request("DELETE", `/cloudq/${q}/${job.id}`)).json).toEqual({ status: "success" });
    expect((await t.request("GET", `/v1/queues/${q}/jobs/${job.id}`)).json.job.state).toBe("completed");
  });

  it("GET /cloudq/stats answers [{key, value:{published, consumed, complete}}] from the backend counts", async () => {
    const q = queue();
    for (let i = 0; i < 3; i++) await t.request("POST", `/cloudq/${q}`, { job: { klass: "K", args: [i] } });
    const a = await t.request("GET", `/cloudq/${q}`);
    await t.request("GET", `/cloudq/${q}`);
    await t.request("DELETE", `/cloudq/${q}/${a.json.id}`);
    const stats = await t.request("GET", "/cloudq/stats");
    expect(stats.status).toBe(200);
    expect(stats.json).toContainEqual({ key: q, value: { published: 1, consumed: 1, complete: 1 } });
  });

  it("maps Cloudq priority 1..100 (lower first) onto the core scale, and refuses one outside it or not a number", async () => {
    const q = queue();
    await t.request("POST", `/cloudq/${q}`, { job: { klass: "Late", args: [] } });
    await t.request("POST", `/cloudq/${q}`, { job: { klass: "Urgent", args: [] }, priority: 1 });
    const [late, urgent] = (await t.request("GET", `/v1/queues/${q}/jobs?state=waiting`)).json.jobs.sort(
      (x: { name: string }, y: { name: string }) => x.name.localeCompare(y.name),
    );
    expect(late.priority).toBe(0);
    expect(urgent.priority).toBe(99_000);
    for (const outside of [101, 100.5, 0.5, -1, "1"]) {
      const bad = await t.request("POST", `/cloudq/${q}`, { job: { klass: "K", args: [] }, priority: outside });
      expect(bad.status).toBe(400);
      expect(bad.json).toMatchObject({ status: "error", message: expect.stringContaining("priority") });
    }
  });

  it("a non-integer priority inside 1..100 is accepted and served in its place among the others", async () => {
    const q = queue();
    for (const [klass, priority] of [
      ["Two", 2],
      ["OneAndAHalf", 1.5],
      ["Default", undefined],
      ["One", 1],
      ["OneAndAQuarter", 1.25],
    ] as const) {
      const res = await t.request("POST", `/cloudq/${q}`, { job: { klass, args: [] }, priority });
      expect(res.json).toEqual({ status: "success" });
    }
    const served = [];
    for (let i = 0; i < 5; i++) served.push((await t.request("GET", `/cloudq/${q}`)).json.klass);
    expect(served).toEqual(["One", "OneAndAQuarter", "OneAndAHalf", "Two", "Default"]);
  });

  it("priority 0 and null mean the default, as node-cloudq 2.x stores `priority || 100`", async () => {
    const q = queue();
    for (const priority of [0, null]) {
      const res = await t.request("POST", `/cloudq/${q}`, { job: { klass: `P${priority}`, args: [] }, priority });
      expect(res.json).toEqual({ status: "success" });
    }
    const jobs = (await t.request("GET", `/v1/queues/${q}/jobs?state=waiting`)).json.jobs as Array<{ priority: number }>;
    expect(jobs.map((job) => job.priority)).toEqual([0, 0]);
  });
});

describe("Cloudq door at / (mountAtRoot)", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await openTestGateway({ doors: { cloudq: { mountAtRoot: true } } });
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it("runs the protocol's curl sequence at the root", async () => {
    await seedSequence(t, "");
  });

  it("leaves /v1, /health, /docs and /openapi.json to their own routes", async () => {
    expect((await t.request("GET", "/health")).json.status).toBe("ok");
    expect((await t.request("GET", "/openapi.json")).json.openapi).toBe("3.1.0");
    expect((await t.request("GET", "/docs")).headers.get("content-type")).toContain("text/html");
    expect((await t.request("GET", "/v1/queues")).json.queues).toEqual(expect.any(Array));
    expect((await t.request("GET", "/stats")).json).toEqual(expect.any(Array));
  });
});

describe("Cloudq long polling (doors.cloudq.longPollMs)", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await openTestGateway({ doors: { cloudq: { longPollMs: 600 } } });
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it("a GET on an empty queue waits out longPollMs, then answers empty", async () => {
    const started = Date.now();
    const empty = await t.request("GET", "/cloudq/poll-empty");
    expect(empty.json).toEqual({ status: "empty" });
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
  });

  it("a job published while a GET waits is handed to that GET at once, woken rather than found by the next look", async () => {
    const waiting = t.request("GET", "/cloudq/poll-job");
    await until(() => t.gateway.wakeups.parked("poll-job") === 1, "the GET to park");
    const started = Date.now();
    await t.request("POST", "/cloudq/poll-job", { job: { klass: "Late", args: [1] } });
    const got = await waiting;
    expect(got.json).toMatchObject({ klass: "Late", args: [1] });
    expect(Date.now() - started).toBeLessThan(t.gateway.wakeups.pollMs);
  });

  it("a GET whose client went away stops waiting and reserves nothing it could not hand over", async () => {
    const client = new AbortController();
    const abandoned = t.gateway.app.request("/cloudq/poll-gone", { signal: client.signal });
    await until(() => t.gateway.wakeups.parked("poll-gone") === 1, "the GET to park");
    client.abort();
    await until(() => t.gateway.wakeups.parked("poll-gone") === 0, "the abandoned GET to stop waiting");
    await t.request("POST", "/cloudq/poll-gone", { job: { klass: "Kept", args: [] } });
    await Promise.resolve(abandoned).catch(() => undefined);
    const next = await t.request("GET", "/cloudq/poll-gone");
    expect(next.json).toMatchObject({ klass: "Kept" });
  });
});

describe("Cloudq basic auth", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await openTestGateway({ doors: { cloudq: { token: "tok", secret: "sec" } } });
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it('refuses a request without credentials as node-cloudq 2.x (connect) does: 401, realm "Authorization Required", body Unauthorized with no Content-Type, storing nothing', async () => {
    const before = t.totalRows();
    const res = await t.request("POST", "/cloudq/secure", { job: { klass: "K", args: [] } });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Basic realm="Authorization Required"');
    expect(res.headers.get("content-type")).toBeNull();
    expect(res.text).toBe("Unauthorized");
    expect(t.totalRows()).toBe(before);
  });

  it("refuses a wrong secret and accepts the right token and secret", async () => {
    expect((await t.request("GET", "/cloudq/secure", undefined, basic("tok", "nope"))).status).toBe(401);
    await seedSequence(t, "/cloudq", basic("tok", "sec"));
  });

  it("serves GET /stats without auth", async () => {
    expect((await t.request("GET", "/cloudq/stats")).status).toBe(200);
  });

  it("takes TOKEN and SECRET from the environment when the config leaves them null", async () => {
    const fromEnv = await openTestGateway({}, { TOKEN: "envtok", SECRET: "envsec" });
    try {
      expect((await fromEnv.request("GET", "/cloudq/q")).status).toBe(401);
      expect((await fromEnv.request("GET", "/cloudq/q", undefined, basic("envtok", "envsec"))).json).toEqual({ status: "empty" });
    } finally {
      await fromEnv.cleanup();
    }
  });
});
