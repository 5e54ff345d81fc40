import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { type Gateway, createGateway } from "../src/index.js";
import { type TestResponse, send } from "./helpers.js";

// The /v1 job actions beyond the Backend contract (retry, promote, priority, drain), on SQLite
// (core JobEditing), qless-redis (qless's own commands) and glidemq-valkey (its queue administration).
// Redis database 14 is this suite's; queue names are random, so nothing needs flushing.
const redisUrl = `${serviceUrl("redis").replace(/\/\d*$/, "")}/14`;
const dir = mkdtempSync(join(tmpdir(), "switchyard-actions-"));
const sqliteFile = join(dir, "actions.sqlite");
const TOKENS = { READ: "read-secret", WRITE: "write-secret", ADMIN: "admin-secret" };

let gateway: Gateway;
let redis: Redis;

beforeAll(async () => {
  gateway = await createGateway({
    config: {
      backends: {
        sql: { type: "workerqueue-sql", url: `sqlite:${sqliteFile}` },
        ql: { type: "qless-redis", url: redisUrl },
        glide: { type: "glidemq-valkey", url: redisUrl },
      },
      routes: [
        { pattern: "ql-*", backend: "ql" },
        { pattern: "glide-*", backend: "glide" },
        { pattern: "*", backend: "sql" },
      ],
      auth: {
        tokens: [
          { name: "reader", token: "env:READ", access: "read" },
          { name: "writer", token: "env:WRITE", access: "write" },
          { name: "admin", token: "env:ADMIN", access: "admin" },
        ],
      },
    },
    env: TOKENS,
  });
  redis = new Redis(redisUrl);
});

afterAll(async () => {
  redis?.disconnect();
  await gateway?.close();
  rmSync(dir, { recursive: true, force: true });
});

const as = (token: string) => ({ authorization: `Bearer ${token}` });
const call = (method: string, path: string, body?: unknown, token = TOKENS.ADMIN): Promise<TestResponse> =>
  send(gateway, method, path, body, as(token));

/** Probes that read each store directly: the state the native layout holds for a job. */
const NATIVE_STATE: Record<string, (queue: string, id: string) => Promise<string | null>> = {
  sql: async (_queue, id) => {
    const db = new Database(sqliteFile, { readonly: true });
    try {
      return (db.prepare("select status from jobs where id = ?").get(Number(id)) as { status: string } | undefined)?.status ?? null;
    } finally {
      db.close();
    }
  },
  ql: async (_queue, id) => redis.hget(`ql:j:${id}`, "state"),
};
const WAITING_NATIVE: Record<string, string> = { sql: "pending", ql: "waiting" };

let serial = 0;
const queueName = (prefix: string) => `${prefix}actions-${process.pid}-${++serial}`;

async function enqueue(queue: string, input: Record<string, unknown> = {}): Promise<string> {
  const res = await call("POST", `/v1/queues/${queue}/jobs`, { name: "work", data: { n: 1 }, ...input });
  expect(res.status).toBe(201);
  return res.json.job.id;
}

async function reserveOne(queue: string): Promise<string | undefined> {
  const res = await call("POST", `/v1/queues/${queue}/reserve`, { worker: "w1" });
  expect(res.status).toBe(200);
  return res.json.jobs[0]?.id;
}

async function failedJob(queue: string): Promise<string> {
  const id = await enqueue(queue, { maxAttempts: 1 });
  expect(await reserveOne(queue)).toBe(id);
  const failed = await call("POST", `/v1/queues/${queue}/jobs/${id}/fail`, { worker: "w1", error: { message: "boom" } });
  expect(failed.json.job.state).toBe("failed");
  return id;
}

for (const [backend, prefix] of [
  ["sql", ""],
  ["ql", "ql-"],
] as const) {
  describe(`job actions on ${backend === "sql" ? "workerqueue-sql (SQLite)" : "qless-redis"}`, () => {
    it("retry puts a failed job back to waiting, in the store too, and a worker gets it again", async () => {
      const queue = queueName(prefix);
      const id = await failedJob(queue);
      const res = await call("POST", `/v1/queues/${queue}/jobs/${id}/retry`);
      expect(res.status).toBe(200);
      // The last error may stay on record (qless keeps a re-put job's failure, as qless itself does).
      expect(res.json.job).toMatchObject({ id, state: "waiting" });
      expect(await NATIVE_STATE[backend]!(queue, id)).toBe(WAITING_NATIVE[backend]);
      expect(await reserveOne(queue)).toBe(id);
    });

    it("retry refuses a job that has not failed with 409", async () => {
      const queue = queueName(prefix);
      const id = await enqueue(queue);
      const res = await call("POST", `/v1/queues/${queue}/jobs/${id}/retry`);
      expect(res.status).toBe(409);
      expect(res.json.error.message).toMatch(/is waiting; only a failed or canceled job/);
    });

    it("promote makes a delayed job due now", async () => {
      const queue = queueName(prefix);
      const id = await enqueue(queue, { delay: 3_600_000 });
      expect(await reserveOne(queue)).toBeUndefined();
      const res = await call("POST", `/v1/queues/${queue}/jobs/${id}/promote`);
      expect(res.status).toBe(200);
      expect(res.json.job.state).toBe("waiting");
      expect(await reserveOne(queue)).toBe(id);
    });

    it("priority moves a waiting job ahead in the claim order", async () => {
      const queue = queueName(prefix);
      await enqueue(queue);
      const later = await enqueue(queue);
      const res = await call("POST", `/v1/queues/${queue}/jobs/${later}/priority`, { priority: 10 });
      expect(res.status).toBe(200);
      expect(res.json.job.priority).toBe(10);
      expect(await reserveOne(queue)).toBe(later);
    });

    it("priority refuses a missing or fractional priority with 400, and an unknown job with 404", async () => {
      const queue = queueName(prefix);
      const id = await enqueue(queue);
      expect((await call("POST", `/v1/queues/${queue}/jobs/${id}/priority`, { priority: 1.5 })).status).toBe(400);
      expect((await call("POST", `/v1/queues/${queue}/jobs/${id}/priority`, {})).status).toBe(400);
      expect((await call("POST", `/v1/queues/${queue}/jobs/${id}/priority`, "{oops")).status).toBe(400);
      const unknown = await call("POST", `/v1/queues/${queue}/jobs/no-such-job/priority`, { priority: 1 });
      expect(unknown.status).toBe(404);
    });

    it("drain withdraws the waiting jobs and leaves delayed ones unless asked", async () => {
      const queue = queueName(prefix);
      for (let i = 0; i < 3; i++) await enqueue(queue);
      await enqueue(queue, { delay: 3_600_000 });
      const res = await call("POST", `/v1/queues/${queue}/drain`);
      expect(res.json).toEqual({ queue, drained: 3 });
      const counts = (await call("GET", `/v1/queues/${queue}/counts`)).json.counts;
      expect(counts).toMatchObject({ waiting: 0, delayed: 1 });
      expect((await call("POST", `/v1/queues/${queue}/drain?delayed=true`)).json.drained).toBe(1);
      expect((await call("POST", `/v1/queues/${queue}/drain?delayed=maybe`)).status).toBe(400);
    });
  });
}

describe("job actions on glidemq-valkey", () => {
  it("retrying one job answers 501 naming the backend: glide-mq retries failed jobs only in bulk", async () => {
    const queue = queueName("glide-");
    const id = await failedJob(queue);
    const res = await call("POST", `/v1/queues/${queue}/jobs/${id}/retry`);
    expect(res.status).toBe(501);
    expect(res.json.error.message).toMatch(/glidemq-valkey backend/);
  });

  it("promote and priority use glide-mq's own administration", async () => {
    const queue = queueName("glide-");
    const delayed = await enqueue(queue, { delay: 3_600_000 });
    expect((await call("POST", `/v1/queues/${queue}/jobs/${delayed}/promote`)).json.job.state).toBe("waiting");
    const other = await enqueue(queue);
    expect((await call("POST", `/v1/queues/${queue}/jobs/${other}/priority`, { priority: 5 })).status).toBe(200);
    expect(await reserveOne(queue)).toBe(other);
  });
});

describe("job actions need their access level", () => {
  it("a read token may not retry, promote or change a priority (403); a write token may not drain (403)", async () => {
    const queue = queueName("");
    const id = await failedJob(queue);
    for (const action of ["retry", "promote"])
      expect((await call("POST", `/v1/queues/${queue}/jobs/${id}/${action}`, undefined, TOKENS.READ)).status).toBe(403);
    expect((await call("POST", `/v1/queues/${queue}/jobs/${id}/priority`, { priority: 1 }, TOKENS.READ)).status).toBe(403);
    expect((await call("POST", `/v1/queues/${queue}/drain`, undefined, TOKENS.WRITE)).status).toBe(403);
    expect((await call("POST", `/v1/queues/${queue}/jobs/${id}/retry`, undefined, TOKENS.WRITE)).status).toBe(200);
  });

  it("every action is in /openapi.json with the role it needs", async () => {
    const paths = (await call("GET", "/openapi.json")).json.paths;
    expect(paths["/v1/queues/{queue}/jobs/{id}/retry"].post.security).toEqual([{ bearer: ["write"] }]);
    expect(paths["/v1/queues/{queue}/jobs/{id}/promote"].post.security).toEqual([{ bearer: ["write"] }]);
    expect(paths["/v1/queues/{queue}/jobs/{id}/priority"].post.security).toEqual([{ bearer: ["write"] }]);
    expect(paths["/v1/queues/{queue}/drain"].post.security).toEqual([{ bearer: ["admin"] }]);
  });
});
