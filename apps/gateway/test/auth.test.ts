import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, type ConfigInput, createGateway } from "../src/index.js";
import { type TestGateway, openTestGateway } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "switchyard-auth-"));
const adminTokenFile = join(dir, "admin.token");
writeFileSync(adminTokenFile, "admin-token-from-file\n");

const TOKENS = {
  read: "read-token",
  write: "write-token-from-env",
  admin: "admin-token-from-file",
  scoped: "scoped-admin-token",
  metrics: "metrics-token",
};

const auth: ConfigInput["auth"] = {
  tokens: [
    { name: "reader", token: TOKENS.read, access: "read" },
    { name: "writer", token: "env:WRITER_TOKEN", access: "write" },
    { name: "admin", token: `file:${adminTokenFile}`, access: "admin" },
    { name: "scoped", token: TOKENS.scoped, access: "admin", queues: ["allowed-*"] },
    { name: "scraper", token: TOKENS.metrics, access: "metrics" },
  ],
};

let t: TestGateway;
beforeAll(async () => {
  t = await openTestGateway({ auth }, { WRITER_TOKEN: TOKENS.write });
});
afterAll(async () => {
  await t.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

interface Operation {
  method: string;
  path: string;
  access: string;
}

/** Every route of the document that names the access it needs, with the level as OpenAPI 3.1 lists it. */
async function operations(): Promise<Operation[]> {
  const document = (await t.request("GET", "/openapi.json")).json as {
    paths: Record<string, Record<string, { security?: Array<Record<string, string[]>> }>>;
  };
  return Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).flatMap(([method, operation]) => {
      const access = operation.security?.[0]?.bearer?.[0];
      return access ? [{ method: method.toUpperCase(), path, access }] : [];
    }),
  );
}

/** An empty JSON body where the method takes one. */
const bodyFor = (method: string) => (method === "GET" || method === "DELETE" ? undefined : {});

/** A concrete path: the queue given, a job id, and for /qless a command of the route's own level. */
function concrete(path: string, queue: string): string {
  return path.replace("{queue}", queue).replace("{id}", "job-1").replace("{command}", "get");
}

describe("bearer tokens on every route of /openapi.json", () => {
  it("no token or an unknown one is 401; a level, door or queue the token lacks is 403; nothing is stored; the right token passes", async () => {
    const ops = await operations();
    expect(ops.length).toBeGreaterThanOrEqual(20);
    const rows = t.totalRows();
    for (const { method, path, access } of ops) {
      const url = concrete(path, "allowed-q");
      const what = `${method} ${url}`;
      const missing = await t.request(method, url, bodyFor(method));
      expect(missing.status, what).toBe(401);
      expect(missing.headers.get("www-authenticate"), what).toMatch(/realm="switchyard"/);
      expect((await t.request(method, url, bodyFor(method), bearer("nobody-knows-this"))).status, what).toBe(401);
      if (path !== "/metrics") expect((await t.request(method, url, bodyFor(method), bearer(TOKENS.metrics))).status, what).toBe(403);
      if (access === "write" || access === "admin") {
        const reader = await t.request(method, url, bodyFor(method), bearer(TOKENS.read));
        expect(reader.status, what).toBe(403);
        expect(JSON.stringify(reader.json), what).toContain(`needs ${access}`);
      }
      if (access === "admin") expect((await t.request(method, url, bodyFor(method), bearer(TOKENS.write))).status, what).toBe(403);
      if (path.includes("{queue}")) {
        const denied = await t.request(method, concrete(path, "denied-q"), bodyFor(method), bearer(TOKENS.scoped));
        expect(denied.status, what).toBe(403);
        expect(JSON.stringify(denied.json), what).toContain('may not use queue \\"denied-q\\"');
      }
    }
    expect(t.totalRows()).toBe(rows);
    // The status alone: an event stream's body never ends, so it is cancelled unread.
    const statusOf = async (method: string, url: string, token: string) => {
      const body = bodyFor(method);
      const res = await t.gateway.app.request(url, {
        method,
        headers: { ...bearer(token), "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      await res.body?.cancel();
      return res.status;
    };
    for (const { method, path } of ops) {
      expect([401, 403], `${method} ${path}`).not.toContain(await statusOf(method, concrete(path, "allowed-q"), TOKENS.admin));
      // Routes with the queue in the path; the others take it from the body (tested below).
      if (path.includes("{queue}")) {
        expect([401, 403], `${method} ${path}`).not.toContain(await statusOf(method, concrete(path, "allowed-q"), TOKENS.scoped));
      }
    }
  });

  it("the right token gets the usual answers: a writer enqueues and reserves, a reader lists, the scoped token sees only its queues", async () => {
    const created = await t.request("POST", "/v1/queues/allowed-work/jobs", { name: "Send" }, bearer(TOKENS.write));
    expect(created.status).toBe(201);
    expect((await t.request("POST", "/v1/queues/other-work/jobs", { name: "Send" }, bearer(TOKENS.write))).status).toBe(201);
    const reserved = await t.request("POST", "/v1/queues/allowed-work/reserve", { worker: "w" }, bearer(TOKENS.write));
    expect(reserved.json.jobs).toMatchObject([{ id: created.json.job.id }]);
    const counts = await t.request("GET", "/v1/queues/allowed-work/counts", undefined, bearer(TOKENS.read));
    expect(counts.json.counts).toMatchObject({ active: 1 });
    const seen = await t.request("GET", "/v1/queues", undefined, bearer(TOKENS.scoped));
    const names = seen.json.queues.map((queue: { name: string }) => queue.name);
    expect(names).toContain("allowed-work");
    expect(names).not.toContain("other-work");
  });

  it("the Worker Queue and qless doors check the queue their body names, and qless commands by their own level", async () => {
    const denied = await t.request("POST", "/workerqueue/jobs", { name: "thumb", queue: "denied-q" }, bearer(TOKENS.scoped));
    expect(denied.status).toBe(403);
    expect((await t.request("POST", "/workerqueue/jobs", { name: "thumb" }, bearer(TOKENS.scoped))).status).toBe(403); // the door's default queue
    expect((await t.request("POST", "/workerqueue/jobs", { name: "thumb", queue: "allowed-wq" }, bearer(TOKENS.scoped))).status).toBe(201);

    const put = (token: string, queue: string) =>
      t.request("POST", "/qless/put", { args: ["client", queue, `jid-${queue}-${token.length}`, "K", "{}", 0] }, bearer(token));
    expect((await put(TOKENS.read, "allowed-ql")).status).toBe(403);
    expect((await put(TOKENS.scoped, "denied-ql")).status).toBe(403);
    expect((await put(TOKENS.write, "allowed-ql")).status).toBe(200);
    expect((await t.request("POST", "/qless/peek", { args: ["allowed-ql", 5] }, bearer(TOKENS.read))).status).toBe(200);
    expect((await t.request("POST", "/qless/pause", { args: ["allowed-ql"] }, bearer(TOKENS.write))).status).toBe(403);
  });

  it("a recurring job found by its jid is checked against its own queue, not the one the body names", async () => {
    const recur = { args: ["denied-recur", "nightly-denied", "K", "{}", "interval", 60, 0] };
    expect((await t.request("POST", "/qless/recur", recur, bearer(TOKENS.admin))).status).toBe(200);
    const asScoped = (command: string, args: Array<string | number>) =>
      t.request("POST", `/qless/${command}`, { queue: "allowed-recur", args }, bearer(TOKENS.scoped));
    expect((await asScoped("recur.get", ["nightly-denied"])).status).toBe(403);
    expect((await asScoped("recur.update", ["nightly-denied", "priority", 5])).status).toBe(403);
    expect((await asScoped("unrecur", ["nightly-denied"])).status).toBe(403);
    // Nor may a recurring job of its own queue be moved into one it may not reach.
    await t.request(
      "POST",
      "/qless/recur",
      { args: ["allowed-recur", "nightly-allowed", "K", "{}", "interval", 60, 0] },
      bearer(TOKENS.scoped),
    );
    expect((await asScoped("recur.update", ["nightly-allowed", "queue", "denied-recur"])).status).toBe(403);
    const kept = await t.request("POST", "/qless/recur.get", { args: ["nightly-allowed"] }, bearer(TOKENS.admin));
    expect(kept.json.reply).toMatchObject({ queue: "allowed-recur", priority: 0 });
    expect((await t.request("POST", "/qless/recur.get", { args: ["nightly-denied"] }, bearer(TOKENS.admin))).json.reply).toMatchObject({
      queue: "denied-recur",
      priority: 0,
    });
  });

  it("Cloudq clients send the token as the basic-auth password; without it the door asks for basic auth", async () => {
    const basic = (password: string) => ({ authorization: `Basic ${Buffer.from(`any-user:${password}`).toString("base64")}` });
    const refused = await t.request("POST", "/cloudq/allowed-cq", { job: { klass: "K", args: [] } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toBe('Basic realm="switchyard"');
    expect(refused.json).toEqual({ status: "error", message: expect.stringContaining("token") });
    expect((await t.request("POST", "/cloudq/allowed-cq", { job: { klass: "K", args: [] } }, basic(TOKENS.write))).json).toEqual({
      status: "success",
    });
    expect((await t.request("GET", "/cloudq/allowed-cq", undefined, basic(TOKENS.read))).status).toBe(403);
  });

  it("/health, /openapi.json and /docs stay open; /metrics takes any token, the metrics one included", async () => {
    expect((await t.request("GET", "/health")).status).toBe(200);
    expect((await t.request("GET", "/openapi.json")).status).toBe(200);
    expect((await t.request("GET", "/docs")).status).toBe(200);
    expect((await t.request("GET", "/metrics")).status).toBe(401);
    expect((await t.request("GET", "/metrics", undefined, bearer(TOKENS.metrics))).status).toBe(200);
    expect((await t.request("GET", "/metrics", undefined, bearer(TOKENS.read))).status).toBe(200);
  });
});

describe("per-token rate limits", () => {
  it("a token over its rate gets 429 with Retry-After and nothing is stored; other tokens are not slowed", async () => {
    const limited = await openTestGateway({
      auth: {
        tokens: [
          { name: "batch", token: "batch-token", access: "write", rateLimit: { perSecond: 0.5, burst: 2 } },
          { name: "web", token: "web-token", access: "write" },
        ],
      },
    });
    try {
      const enqueue = (token: string) => limited.request("POST", "/v1/queues/limited/jobs", { name: "x" }, bearer(token));
      expect((await enqueue("batch-token")).status).toBe(201);
      expect((await enqueue("batch-token")).status).toBe(201);
      const rows = limited.totalRows();
      const over = await enqueue("batch-token");
      expect(over.status).toBe(429);
      expect(over.json.error).toMatchObject({ code: "RATE_LIMITED", message: expect.stringContaining('token "batch"') });
      expect(Number(over.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(limited.totalRows()).toBe(rows);
      for (let i = 0; i < 5; i++) expect((await enqueue("web-token")).status).toBe(201);
    } finally {
      await limited.cleanup();
    }
  });
});

describe("token sources", () => {
  it("a token read from an environment variable that is not set, or from a file that is missing, fails the start naming the token", async () => {
    const config = (token: string): ConfigInput => ({
      backends: { main: { type: "workerqueue-sql", url: `sqlite:${join(dir, "sources.sqlite")}` } },
      auth: { tokens: [{ name: "ci", token, access: "read" }] },
    });
    await expect(createGateway({ config: config("env:NOT_SET_ANYWHERE"), env: {} })).rejects.toThrow(
      'auth.tokens: auth token "ci": the environment variable NOT_SET_ANYWHERE is not set',
    );
    await expect(createGateway({ config: config(`file:${join(dir, "missing")}`), env: {} })).rejects.toBeInstanceOf(ConfigError);
  });
});
