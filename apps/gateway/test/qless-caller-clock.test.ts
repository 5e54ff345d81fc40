import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { qlessScriptSource } from "@switchyard/qless-redis";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";
import { type TestGateway, openTestGateway } from "./helpers.js";

/**
 * qless commands carry their caller's clock (`<command> <now> <args...>`), and qless records and
 * compares that time. On a SQLite store the qless doors run each translated command at the `now` the
 * client passed (doors.qless.clock: caller, the default), so a suite that puts at 0 and pops at 10
 * sees what it would see on qless itself; the rows are probed in the SQLite file.
 */
let t: TestGateway;
let onStoreClock: TestGateway;

beforeAll(async () => {
  t = await openTestGateway();
  onStoreClock = await openTestGateway({ doors: { qless: { clock: "store" } } });
});
afterAll(async () => {
  await t?.cleanup();
  await onStoreClock?.cleanup();
});

const qlessOn = (gateway: TestGateway, queue: string) => async (command: string, now: number, args: Array<string | number>) => {
  const res = await gateway.request("POST", `/qless/${command}`, { now, queue, args });
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  return res.json.reply;
};
const row = (gateway: TestGateway, jid: string) => gateway.nativeRows().find((candidate) => candidate.sy_job_id === jid);

describe("the qless door runs translated commands at the caller's now", () => {
  it("a put at 0 with delay 10 is not popped at 5, is at 11 with expires 11 + heartbeat, and history has the nows", async () => {
    const qless = qlessOn(t, "clock-delay");
    expect(await qless("put", 0, ["client", "clock-delay", "j1", "Klass", "{}", 10])).toBe("j1");
    expect(row(t, "j1")).toMatchObject({ sy_created_ms: 0, sy_run_at: 10_000, status: "pending" });
    expect((await qless("get", 1, ["j1"])).state).toBe("scheduled");
    expect(await qless("jobs", 2, ["scheduled", "clock-delay"])).toEqual(["j1"]);

    expect(await qless("pop", 5, ["clock-delay", "w1", 1])).toEqual({});
    const [popped] = await qless("pop", 11, ["clock-delay", "w1", 1]);
    expect(popped).toMatchObject({ jid: "j1", state: "running", worker: "w1", expires: 71 });
    expect(popped.history).toEqual([
      { when: 0, q: "clock-delay", what: "put" },
      { when: 11, what: "popped", worker: "w1" },
    ]);
    expect(row(t, "j1")).toMatchObject({ status: "processing", sy_started_ms: 11_000, sy_lease_until: 71_000 });

    // A heartbeat renews the lock from its own now; completion is recorded at its now.
    expect(await qless("heartbeat", 30.5, ["j1", "w1"])).toBe(90);
    expect(row(t, "j1")).toMatchObject({ sy_lease_until: 90_500 });
    expect(await qless("complete", 40, ["j1", "w1", "clock-delay", "{}"])).toBe("complete");
    expect((await qless("get", 41, ["j1"])).history.map(({ when, what }: { when: number; what: string }) => [when, what])).toEqual([
      [0, "put"],
      [11, "popped"],
      [40, "done"],
    ]);
    expect(row(t, "j1")).toMatchObject({ status: "complete", sy_finished_ms: 40_000 });
  });

  it("a lock that expired by the caller's clock is stalled, kept a grace period at the next pop, then handed out", async () => {
    const qless = qlessOn(t, "clock-lock");
    await qless("put", 100, ["client", "clock-lock", "j2", "Klass", "{}", 0]);
    expect((await qless("pop", 100, ["clock-lock", "w1", 1]))[0]).toMatchObject({ worker: "w1", expires: 160 });
    expect(await qless("jobs", 120, ["running", "clock-lock"])).toEqual(["j2"]);
    expect(await qless("pop", 150, ["clock-lock", "w2", 1])).toEqual({});

    expect(await qless("jobs", 165, ["stalled", "clock-lock"])).toEqual(["j2"]);
    expect(await qless("jobs", 165, ["running", "clock-lock"])).toEqual([]);
    expect(await qless("queues", 165, ["clock-lock"])).toMatchObject({ running: 0, stalled: 1 });
    // qless's grace-period (10 s by default): the first pop after the lock ran out leaves it to its worker until 175.
    expect(await qless("pop", 165, ["clock-lock", "w2", 1])).toEqual({});
    expect(row(t, "j2")).toMatchObject({ sy_worker: "w1", sy_lease_until: 175_000, attempts: 1 });
    const [taken] = await qless("pop", 175, ["clock-lock", "w2", 1]);
    expect(taken).toMatchObject({ jid: "j2", worker: "w2", expires: 235 });
    expect(row(t, "j2")).toMatchObject({ sy_worker: "w2", sy_started_ms: 175_000, sy_lease_until: 235_000, attempts: 2 });
  });

  it("a failure and a retry's delay are at the caller's now", async () => {
    const qless = qlessOn(t, "clock-fail");
    await qless("put", 200, ["client", "clock-fail", "j3", "Klass", "{}", 0, "retries", 2]);
    await qless("put", 200, ["client", "clock-fail", "j4", "Klass", "{}", 0, "retries", 2]);
    await qless("pop", 201, ["clock-fail", "w", 2]);
    expect(await qless("fail", 207, ["j3", "w", "group", "message"])).toBe("j3");
    const failed = await qless("get", 208, ["j3"]);
    expect(failed.failure).toEqual({ group: "group", message: "message", when: 207, worker: "w" });
    expect(failed.history.at(-1)).toEqual({ when: 207, what: "failed", group: "group", worker: "w" });

    expect(await qless("retry", 210, ["j4", "clock-fail", "w", 5])).toBe(1);
    expect(row(t, "j4")).toMatchObject({ status: "pending", sy_run_at: 215_000 });
    expect(await qless("pop", 214, ["clock-fail", "w", 1])).toEqual({});
    expect((await qless("pop", 215, ["clock-fail", "w", 1]))[0]).toMatchObject({ jid: "j4", expires: 275 });
  });

  it("other doors keep the gateway's clock; a request without now runs on it too", async () => {
    const before = Date.now();
    const created = await t.request("POST", "/v1/queues/clock-other/jobs", { name: "Native" });
    expect(created.status).toBe(201);
    expect(created.json.job.createdAt).toBeGreaterThanOrEqual(before);
    const res = await t.request("POST", "/qless/put", { queue: "clock-other", args: ["c", "clock-other", "j5", "K", "{}", 0] });
    expect(res.status).toBe(200);
    expect(Number(row(t, "j5")?.sy_created_ms)).toBeGreaterThanOrEqual(before);
  });

  it('with doors.qless.clock "store" the store\'s clock decides, whatever now the client passes', async () => {
    const qless = qlessOn(onStoreClock, "store-clock");
    const before = Date.now();
    await qless("put", 0, ["client", "store-clock", "j6", "Klass", "{}", 10]);
    expect(Number(row(onStoreClock, "j6")?.sy_created_ms)).toBeGreaterThanOrEqual(before);
    expect(await qless("pop", 11, ["store-clock", "w", 1])).toEqual({});
  });
});

describe("the RESP door runs qless's script calls at the caller's now", () => {
  let dir: string;
  let file: string;
  let server: RunningServer;
  let redis: Redis;
  const QLESS = qlessScriptSource();
  const QLESS_SHA = createHash("sha1").update(QLESS).digest("hex");

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "switchyard-resp-clock-"));
    file = join(dir, "resp.sqlite");
    const backends = { main: { type: "workerqueue-sql", url: `sqlite:${file}` } };
    server = await startServer({ config: { backends, doors: { resp: { port: 0 } } }, port: 0, host: "127.0.0.1", env: {} });
    redis = new Redis({ port: server.respPort as number, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0 });
    await redis.connect();
    await redis.script("LOAD", QLESS);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a put at 0 with delay 10 pops at 11, not at 5, with expires 71 in the reply and the row", async () => {
    const call = async (...argv: Array<string | number>) => redis.evalsha(QLESS_SHA, 0, ...argv);
    expect(await call("put", "0", "producer", "resp-clock", "r1", "Klass", "{}", 10)).toBe("r1");
    expect(await call("pop", "5", "resp-clock", "w1", 1)).toBe("{}");
    const [popped] = JSON.parse((await call("pop", "11.0", "resp-clock", "w1", 1)) as string);
    expect(popped).toMatchObject({ jid: "r1", worker: "w1", expires: 71 });
    expect(popped.history.map((entry: { when: number }) => entry.when)).toEqual([0, 11]);
    const db = new Database(file, { readonly: true });
    try {
      expect(db.prepare("select sy_created_ms, sy_started_ms, sy_lease_until from jobs where sy_job_id = ?").get("r1")).toEqual({
        sy_created_ms: 0,
        sy_started_ms: 11_000,
        sy_lease_until: 71_000,
      });
    } finally {
      db.close();
    }
  });
});
