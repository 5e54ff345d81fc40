import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Throughput } from "../src/dashboard/throughput.js";
import { JobEvents } from "../src/events.js";
import { type TestGateway, openTestGateway } from "./helpers.js";

// What the dashboard reads besides the /v1 door (whoami, overview, throughput) and how its page is
// served: the shell for every /dashboard path, hashed assets cached for good, no token needed.
let open: TestGateway;
let secured: TestGateway;
const TOKENS = { READ: "read-secret", ADMIN: "admin-secret" };

beforeAll(async () => {
  open = await openTestGateway();
  secured = await openTestGateway(
    {
      auth: {
        tokens: [
          { name: "viewer", token: "env:READ", access: "read", queues: ["mail-*"] },
          { name: "ops", token: "env:ADMIN", access: "admin" },
        ],
      },
    },
    TOKENS,
  );
});

afterAll(async () => {
  await open?.cleanup();
  await secured?.cleanup();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe("GET /v1/whoami", () => {
  it("answers admin with no name when no token is configured", async () => {
    const res = await open.request("GET", "/v1/whoami");
    expect(res.json).toEqual({ authEnabled: false, name: null, access: "admin", doors: null, queues: null });
  });

  it("answers the token's name, access and queue patterns as configured, and 401 without a token", async () => {
    const res = await secured.request("GET", "/v1/whoami", undefined, bearer(TOKENS.READ));
    expect(res.json).toEqual({ authEnabled: true, name: "viewer", access: "read", doors: null, queues: ["mail-*"] });
    expect((await secured.request("GET", "/v1/whoami")).status).toBe(401);
  });
});

describe("GET /v1/overview and /v1/queues/:queue/overview", () => {
  it("lists every queue with its backend's type, counts by state and pause state", async () => {
    await open.request("POST", "/v1/queues/overview-a/jobs", { name: "n" });
    await open.request("POST", "/v1/queues/overview-a/pause");
    const res = await open.request("GET", "/v1/overview");
    expect(res.json.backends).toEqual([{ name: "main", type: "workerqueue-sql", actions: { retry: true, promote: true, priority: true } }]);
    expect(res.json.queues).toContainEqual({
      name: "overview-a",
      backend: "main",
      type: "workerqueue-sql",
      paused: true,
      counts: { waiting: 1, delayed: 0, active: 0, completed: 0, failed: 0, canceled: 0, blocked: 0 },
    });
    const one = await open.request("GET", "/v1/queues/overview-a/overview");
    expect(one.json).toMatchObject({ name: "overview-a", type: "workerqueue-sql", paused: true, actions: { retry: true } });
  });

  it("shows a token only the queues its patterns allow", async () => {
    for (const queue of ["mail-out", "billing"])
      await secured.request("POST", `/v1/queues/${queue}/jobs`, { name: "n" }, bearer(TOKENS.ADMIN));
    const res = await secured.request("GET", "/v1/overview", undefined, bearer(TOKENS.READ));
    expect(res.json.queues.map((queue: { name: string }) => queue.name)).toEqual(["mail-out"]);
    expect((await secured.request("GET", "/v1/queues/billing/overview", undefined, bearer(TOKENS.READ))).status).toBe(403);
  });
});

describe("throughput", () => {
  it("GET /v1/queues/:queue/throughput counts a completed job in the current minute of 60", async () => {
    await open.request("POST", "/v1/queues/tp/jobs", { name: "n" });
    const [job] = (await open.request("POST", "/v1/queues/tp/reserve", { worker: "w" })).json.jobs;
    await open.request("POST", `/v1/queues/tp/jobs/${job.id}/complete`, { worker: "w" });
    const res = await open.request("GET", "/v1/queues/tp/throughput");
    expect(res.json.minutes).toHaveLength(60);
    expect(res.json.minutes.at(-1)).toMatchObject({ completed: 1, failed: 0 });
  });

  it("keeps only the last 60 minutes, zero-filled, oldest first, and counts failures for good only", () => {
    const throughput = new Throughput(new JobEvents());
    const now = Date.UTC(2025, 0, 1, 12, 0, 30);
    throughput.record({ type: "completed", queue: "q", time: now - 61 * 60_000 });
    throughput.record({ type: "failed", queue: "q", time: now - 5 * 60_000 });
    throughput.record({ type: "retrying", queue: "q", time: now - 5 * 60_000 });
    throughput.record({ type: "completed", queue: "q", time: now });
    throughput.record({ type: "completed", queue: "q", time: now + 1 });
    const minutes = throughput.minutes("q", now);
    expect(minutes).toHaveLength(60);
    expect(minutes[0]!.at).toBe(now - 30_000 - 59 * 60_000);
    expect(minutes.reduce((sum, m) => sum + m.completed, 0)).toBe(2);
    expect(minutes[54]).toMatchObject({ completed: 0, failed: 1 });
    expect(minutes[59]).toMatchObject({ completed: 2, failed: 0 });
  });
});

describe("the dashboard page", () => {
  it("answers the same HTML shell for every /dashboard path, without a token, with a strict CSP", async () => {
    for (const path of ["/dashboard", "/dashboard/", "/dashboard/queues/a%2Fb", "/dashboard/queues/q/jobs/17"]) {
      const res = await secured.request("GET", path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/html/);
      expect(res.headers.get("content-security-policy")).toMatch(/default-src 'self'/);
      expect(res.text).toMatch(/<script type="module" src="\/dashboard\/assets\/app-[A-Z0-9]+\.js">/);
    }
  });

  it("serves its hashed assets from the package, cached for good, and 404 for any other name", async () => {
    const shell = (await open.request("GET", "/dashboard")).text;
    const script = /src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(shell)![1]!;
    const style = /href="(\/dashboard\/assets\/[^"]+\.css)"/.exec(shell)![1]!;
    const js = await open.request("GET", script);
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect(js.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect((await open.request("GET", style)).headers.get("content-type")).toMatch(/^text\/css/);
    expect((await open.request("GET", "/dashboard/assets/nope-123.js")).status).toBe(404);
    expect((await open.request("GET", "/dashboard/assets/..%2F..%2Fpackage.json")).status).toBe(404);
  });

  it("every dashboard API route is in /openapi.json", async () => {
    const paths = Object.keys((await open.request("GET", "/openapi.json")).json.paths);
    expect(paths).toEqual(
      expect.arrayContaining(["/v1/whoami", "/v1/overview", "/v1/queues/{queue}/overview", "/v1/queues/{queue}/throughput"]),
    );
  });
});
