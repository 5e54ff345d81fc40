import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createQlessBackend } from "@switchyard/qless-redis";
import { createWorkerQueueBackend } from "@switchyard/workerqueue-sql";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { type Gateway, createGateway } from "../src/index.js";
import { send } from "./helpers.js";

// Redis db 9 is shared with the migration tests: random queue names and jids, never FLUSHDB.
const redisUrl = `${serviceUrl("redis").replace(/\/\d*$/, "")}/9`;
const unique = (prefix: string) => `${prefix}-${randomUUID().replaceAll("-", "").slice(0, 12)}`;
const nowSeconds = () => Math.floor(Date.now() / 1000);

const dir = mkdtempSync(join(tmpdir(), "switchyard-qless-door-"));
const sqliteFile = join(dir, "door.sqlite");
let gateway: Gateway;
let redis: Redis;

/** One gateway: `sql-*` queues on SQLite, everything else on qless-redis. */
beforeAll(async () => {
  gateway = await createGateway({
    config: {
      backends: { ql: { type: "qless-redis", url: redisUrl }, sql: { type: "workerqueue-sql", url: `sqlite:${sqliteFile}` } },
      routes: [
        { pattern: "sql-*", backend: "sql" },
        { pattern: "*", backend: "ql" },
      ],
    },
    env: {},
  });
  redis = new Redis(redisUrl);
});

afterAll(async () => {
  await gateway?.close();
  redis?.disconnect();
  rmSync(dir, { recursive: true, force: true });
});

const qless = (command: string, body?: unknown) => send(gateway, "POST", `/qless/${command}`, body);

/** Probe: the workerqueue-sql row of a job, read from the SQLite file directly. */
function sqlRow(jid: string): Record<string, unknown> | undefined {
  const db = new Database(sqliteFile, { readonly: true, fileMustExist: true });
  try {
    return db.prepare("select * from jobs where sy_job_id = ?").get(jid) as Record<string, unknown> | undefined;
  } finally {
    db.close();
  }
}

/** Probe: a recurring job's definition, read from the SQLite side table directly. */
function sqlRecurrence(jid: string): Record<string, unknown> | undefined {
  const db = new Database(sqliteFile, { readonly: true, fileMustExist: true });
  try {
    return db.prepare("select * from jobs_sy_recurring where id = ?").get(jid) as Record<string, unknown> | undefined;
  } finally {
    db.close();
  }
}

describe("qless door on a qless-redis backend runs the command verbatim on the qless script", () => {
  it("put, pop, heartbeat and complete leave ql:j:<jid> exactly as qless writes it", async () => {
    const queue = unique("q");
    const jid = unique("jid");
    const t = nowSeconds();

    const put = await qless("put", {
      now: t,
      args: ["client-1", queue, jid, "my.Klass", '{"x":1}', 0, "priority", 5, "tags", '["a"]', "retries", 2],
    });
    expect(put.status).toBe(200);
    expect(put.json).toEqual({ reply: jid });
    expect(await redis.hgetall(`ql:j:${jid}`)).toMatchObject({
      jid,
      klass: "my.Klass",
      data: '{"x":1}',
      state: "waiting",
      queue,
      worker: "",
      priority: "5",
      tags: '["a"]',
      retries: "2",
      remaining: "2",
      expires: "0",
    });

    const pop = await qless("pop", { now: t + 1, args: [queue, "worker-1", 1] });
    expect(pop.status).toBe(200);
    expect(pop.json.reply).toHaveLength(1);
    expect(pop.json.reply[0]).toMatchObject({
      jid,
      klass: "my.Klass",
      data: '{"x":1}',
      state: "running",
      worker: "worker-1",
      expires: t + 61,
    });
    expect(await redis.hgetall(`ql:j:${jid}`)).toMatchObject({ state: "running", worker: "worker-1", queue, expires: String(t + 61) });
    expect(Number(await redis.zscore(`ql:q:${queue}-locks`, jid))).toBe(t + 61);

    const heartbeat = await qless("heartbeat", { now: t + 10.5, args: [jid, "worker-1"] });
    expect(heartbeat.json).toEqual({ reply: t + 70 }); // qless truncates the float expiry to an integer reply
    expect(Number(await redis.hget(`ql:j:${jid}`, "expires"))).toBe(t + 70.5);

    const lost = await qless("heartbeat", { now: t + 11, args: [jid, "worker-2"] });
    expect(lost.status).toBe(400);
    expect(lost.json.error).toEqual({ code: "QLESS_ERROR", message: `Heartbeat(): Job ${jid} given out to another worker: worker-1` });

    const complete = await qless("complete", { now: t + 20, args: [jid, "worker-1", queue, '{"x":2}'] });
    expect(complete.json).toEqual({ reply: "complete" });
    expect(await redis.hgetall(`ql:j:${jid}`)).toMatchObject({ state: "complete", queue: "", worker: "", data: '{"x":2}' });
    expect(await redis.zscore("ql:completed", jid)).toBe(String(t + 20));
  });

  it("peek, get, queues, length, jobs and stats answer qless's reply shapes as JSON", async () => {
    const queue = unique("q");
    const [a, b] = [unique("jid"), unique("jid")];
    const t = nowSeconds();
    await qless("put", { now: t, args: ["c", queue, a, "K", '{"n":1}', 0] });
    await qless("put", { now: t + 1, args: ["c", queue, b, "K", '{"n":2}', 0] });

    const peek = await qless("peek", { now: t + 2, args: [queue, 10] });
    expect(peek.json.reply.map((job: { jid: string }) => job.jid)).toEqual([a, b]);
    expect(peek.json.reply[0]).toMatchObject({ state: "waiting", data: '{"n":1}', tags: {}, history: [{ what: "put", q: queue }] });

    // A jid-only command: the one qless-redis backend runs it. curl -d sends a form content type with JSON.
    const get = await send(gateway, "POST", "/qless/get", JSON.stringify({ args: [a] }), {
      "content-type": "application/x-www-form-urlencoded",
    });
    expect(get.json.reply).toMatchObject({ jid: a, klass: "K", queue, state: "waiting", retries: 5, remaining: 5, failure: {} });
    expect((await qless("get", { args: [unique("missing")] })).json).toEqual({ reply: null });

    expect((await qless("length", { args: [queue] })).json).toEqual({ reply: 2 });
    const one = await qless("queues", { args: [queue] });
    expect(one.json.reply).toEqual({
      name: queue,
      paused: false,
      waiting: 2,
      running: 0,
      scheduled: 0,
      depends: 0,
      stalled: 0,
      recurring: 0,
    });
    const all = await qless("queues"); // no body: no args, the server's clock
    expect(all.json.reply).toEqual(expect.arrayContaining([expect.objectContaining({ name: queue, waiting: 2 })]));

    await qless("pop", { now: t + 3, args: [queue, "w", 1] });
    expect((await qless("jobs", { now: t + 4, args: ["running", queue] })).json).toEqual({ reply: [a] }); // multi-bulk stays a list

    const config = await qless("config.get");
    expect(config.json.reply).toMatchObject({ heartbeat: 60, "grace-period": 10 }); // JSON only without a key
    expect((await qless("config.get", { args: ["heartbeat"] })).json).toEqual({ reply: 60 });

    const stats = await qless("stats", { args: [queue, t] });
    expect(stats.json.reply).toMatchObject({ retries: 0, failed: 0, failures: 0, wait: { count: 1 }, run: { count: 0 } });
    expect(stats.json.reply.wait.histogram).toHaveLength(148);
  });

  it("a script error answers 400 QLESS_ERROR with qless's message and writes nothing", async () => {
    const queue = unique("q");
    const jid = unique("jid");
    const res = await qless("put", { args: ["c", queue, jid, "K", "{}", "soon"] });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: { code: "QLESS_ERROR", message: 'Put(): Arg "delay" not a number: soon' } });
    const badNow = await qless("put", { now: "later", args: ["c", queue, jid, "K", "{}", 0] });
    expect(badNow.status).toBe(400);
    expect(badNow.json.error).toEqual({ code: "QLESS_ERROR", message: 'Arg "now" missing or not a number: nil' });
    expect(await redis.exists(`ql:j:${jid}`)).toBe(0);
    expect(await redis.zscore("ql:queues", queue)).toBeNull();
  });

  it("bad JSON, args that are not an array and switchyard.* commands answer 400 and write nothing", async () => {
    const queue = unique("q");
    const jid = unique("jid");
    const badJson = await qless("put", `{"args": ["c", "${queue}", "${jid}", "K", "{}", 0`);
    expect(badJson.status).toBe(400);
    expect(badJson.json.error.code).toBe("VALIDATION");
    const notArray = await qless("put", { args: `c ${queue} ${jid} K {} 0` });
    expect(notArray.status).toBe(400);
    expect(notArray.json.error).toMatchObject({ code: "VALIDATION", message: expect.stringContaining("args") });
    const badArg = await qless("put", { args: ["c", queue, jid, "K", { x: 1 }, 0] });
    expect(badArg.status).toBe(400);
    const internal = await qless("switchyard.enqueue", { args: [queue, jid, "K", "{}", 0, 0, "[]", 0, "[]", "", ""] });
    expect(internal.status).toBe(400);
    // The adapter's own switchyard.* script commands are not qless's: refused before any store sees them.
    expect(internal.json.error).toEqual({
      code: "VALIDATION",
      message: "invalid param: command: Unknown command: not one of qless-core's",
    });
    expect(await redis.exists(`ql:j:${jid}`)).toBe(0);
    expect(await redis.zscore("ql:queues", queue)).toBeNull();
  });

  it("pause and unpause name their queues and run where those queues live", async () => {
    const queue = unique("q");
    expect((await qless("pause", { args: [queue] })).json).toEqual({ reply: null });
    expect(await redis.sismember("ql:paused_queues", queue)).toBe(1);
    await qless("unpause", { args: [queue] });
    expect(await redis.sismember("ql:paused_queues", queue)).toBe(0);
    const mixed = await qless("pause", { args: [queue, unique("sql")] });
    expect(mixed.status).toBe(400);
    expect(mixed.json.error.message).toMatch(/different backends/);
  });
  it("complete with next moves the job on only when the next queue lives on the same backend", async () => {
    const [queue, next] = [unique("q"), unique("q")];
    const jid = unique("jid");
    await qless("put", { args: ["c", queue, jid, "K", "{}", 0] });
    await qless("pop", { args: [queue, "w", 1] });
    const elsewhere = await qless("complete", { args: [jid, "w", queue, "{}", "next", unique("sql")] });
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.json.error.message).toMatch(/different backends/);
    expect(await redis.hget(`ql:j:${jid}`, "state")).toBe("running");

    const moved = await qless("complete", { args: [jid, "w", queue, "{}", "next", next] });
    expect(moved.json).toEqual({ reply: "waiting" });
    expect(await redis.hmget(`ql:j:${jid}`, "state", "queue")).toEqual(["waiting", next]);
  });
});

describe("qless door on a workerqueue-sql backend translates the core subset", () => {
  it("put then pop gives a qless-shaped running job and a processing SQL row with the lease", async () => {
    const queue = unique("sql");
    const jid = unique("jid");
    const put = await qless("put", { args: ["c", queue, jid, "my.Klass", '{"to":"a@b.c"}', 0, "priority", 0, "tags", "[]", "retries", 2] });
    expect(put.json).toEqual({ reply: jid });
    expect(sqlRow(jid)).toMatchObject({ name: "my.Klass", status: "pending", sy_queue: queue, sy_max_attempts: 3 });
    // A second put of the jid puts the job again, as qless does: the same row, its new klass and data.
    const again = await qless("put", { args: ["c", queue, jid, "Other", "{}", 0] });
    expect(again.json).toEqual({ reply: jid });
    expect(sqlRow(jid)).toMatchObject({ name: "Other", data: "{}", status: "pending" });
    await qless("put", { args: ["c", queue, jid, "my.Klass", '{"to":"a@b.c"}', 0, "retries", 2] });

    const before = Date.now();
    const pop = await qless("pop", { args: [queue, "worker-1", 5] });
    expect(pop.status).toBe(200);
    expect(pop.json.reply).toHaveLength(1);
    const job = pop.json.reply[0];
    expect(job).toMatchObject({
      jid,
      klass: "my.Klass",
      queue,
      state: "running",
      worker: "worker-1",
      data: '{"to":"a@b.c"}',
      priority: 0,
      retries: 2,
      remaining: 2,
      tags: {},
      failure: {},
      tracked: false,
    });
    // As qless's history: each of the three puts, then the pop.
    expect(job.history.map((entry: { what: string }) => entry.what)).toEqual(["put", "put", "put", "popped"]);
    expect(job.expires).toBeGreaterThanOrEqual(before / 1000 + 59);
    const row = sqlRow(jid);
    expect(["processing", "loading"]).toContain(row?.status);
    expect(row).toMatchObject({ sy_worker: "worker-1", sy_lease_until: job.expires * 1000 });

    expect((await qless("pop", { args: [queue, "worker-1", 1] })).json).toEqual({ reply: {} }); // empty, as cjson encodes it
  });

  it("heartbeat, get and complete take the job's queue from the body; complete leaves the row complete", async () => {
    const queue = unique("sql");
    const jid = unique("jid");
    await qless("put", { args: ["c", queue, jid, "K", "[1]", 0] });
    await qless("pop", { args: [queue, "w", 1] });

    const heartbeat = await qless("heartbeat", { queue, args: [jid, "w", "[1]"] });
    expect(heartbeat.status).toBe(200);
    expect(Number.isInteger(heartbeat.json.reply)).toBe(true);
    expect(heartbeat.json.reply).toBe(Math.floor(Number(sqlRow(jid)?.sy_lease_until) / 1000));
    expect((await qless("get", { queue, args: [jid] })).json.reply).toMatchObject({ jid, state: "running", worker: "w" });
    const multiget = await qless("multiget", { queue, args: [jid, unique("missing")] });
    expect(multiget.json.reply.map((job: { jid: string }) => job.jid)).toEqual([jid]); // missing jids left out, as qless does
    expect((await qless("length", { args: [queue] })).json).toEqual({ reply: 1 });

    const complete = await qless("complete", { args: [jid, "w", queue, "[1]"] });
    expect(complete.json).toEqual({ reply: "complete" });
    expect(sqlRow(jid)?.status).toBe("complete");
    expect((await qless("get", { queue, args: [jid] })).json.reply).toMatchObject({ jid, state: "complete", queue: "" });
  });

  it("fail with the queue in the body fails the job for good with its group and message", async () => {
    const queue = unique("sql");
    const jid = unique("jid");
    await qless("put", { args: ["c", queue, jid, "K", "{}", 0] });
    await qless("pop", { args: [queue, "w", 1] });
    expect((await qless("fail", { queue, args: [jid, "w", "K:Boom", "boom\ntrace"] })).json).toEqual({ reply: jid });
    expect(sqlRow(jid)).toMatchObject({ status: "error", details: "boom\ntrace", sy_error_group: "K:Boom" });
    expect((await qless("get", { queue, args: [jid] })).json.reply).toMatchObject({
      state: "failed",
      failure: { group: "K:Boom", message: "boom\ntrace" },
    });
  });

  it("put's delay, priority and retries become the row's run time, priority and attempt budget", async () => {
    const queue = unique("sql");
    const jid = unique("jid");
    const before = Date.now();
    await qless("put", { args: ["c", queue, jid, "K", "{}", 30, "priority", 7, "retries", 0] });
    const row = sqlRow(jid);
    expect(row).toMatchObject({ status: "pending", locked_queue_id: "sy:delayed", sy_priority: 7, sy_max_attempts: 1 });
    expect(Number(row?.sy_run_at)).toBeGreaterThanOrEqual(before + 30_000);
    expect((await qless("get", { queue, args: [jid] })).json.reply).toMatchObject({ state: "scheduled", priority: 7, retries: 0 });
    expect((await qless("queues", { args: [queue] })).json.reply).toEqual({
      name: queue,
      paused: false,
      waiting: 0,
      running: 0,
      scheduled: 1,
      depends: 0,
      stalled: 0,
      recurring: 0,
    });
    expect((await qless("pop", { args: [queue, "w", 1] })).json).toEqual({ reply: {} }); // not due yet
  });

  it("remaining counts down as qless's does: not on pop, once per run that ends in a retry", async () => {
    const queue = unique("sql");
    const jid = unique("jid");
    await qless("put", { args: ["c", queue, jid, "K", "{}", 0, "retries", 3] });
    const remaining = async () => (await qless("get", { queue, args: [jid] })).json.reply.remaining;
    expect(await remaining()).toBe(3);
    await qless("pop", { args: [queue, "w", 1] });
    expect(await remaining()).toBe(3);
    const retried = await send(gateway, "POST", `/v1/queues/${queue}/jobs/${jid}/fail`, {
      worker: "w",
      error: { message: "x" },
      retry: true,
    });
    expect(retried.json.job).toMatchObject({ state: "waiting", attempts: 1 });
    expect(await remaining()).toBe(2);
    await qless("pop", { args: [queue, "w", 1] });
    expect(await remaining()).toBe(2);
  });

  it("a put with a bad argument answers qless's error and writes no row", async () => {
    const queue = unique("sql");
    const jid = unique("jid");
    const res = await qless("put", { args: ["c", queue, jid, "K", "{}", "soon"] });
    expect(res.status).toBe(400);
    expect(res.json.error).toEqual({ code: "QLESS_ERROR", message: 'Put(): Arg "delay" not a number: soon' });
    expect(sqlRow(jid)).toBeUndefined();
  });

  it("recur keeps the definition in the store's side table, and a pop adds the due instances as jobs of the queue", async () => {
    const queue = unique("sql");
    const jid = unique("rec");
    const now = nowSeconds();
    const recur = await qless("recur", {
      now,
      args: [queue, jid, "Report", '{"to": "ops"}', "interval", 60, 0, "priority", 4, "tags", '["nightly"]', "retries", 2],
    });
    expect(recur.json).toEqual({ reply: jid });
    // Probe: one row in <table>_sy_recurring, nothing in the jobs table yet.
    const definition = sqlRecurrence(jid);
    expect(definition).toMatchObject({ queue, name: "Report", priority: 4, max_attempts: 3, interval_ms: 60_000, count: 0 });
    expect(Number(definition?.next_at)).toBe(now * 1000);
    expect(sqlRow(`${jid}-1`)).toBeUndefined();
    expect((await qless("recur.get", { queue, args: [jid] })).json.reply).toEqual({
      jid,
      klass: "Report",
      state: "recur",
      queue,
      priority: 4,
      interval: 60,
      retries: 2,
      count: 0,
      data: '{"to": "ops"}',
      tags: ["nightly"],
      backlog: 0,
    });
    // Three intervals later a pop of two adds (and hands out) two instances, put when each was due.
    const popped = (await qless("pop", { now: now + 125, args: [queue, "w", 2] })).json.reply;
    expect(popped.map((job: { jid: string }) => job.jid)).toEqual([`${jid}-1`, `${jid}-2`]);
    expect(popped[0]).toMatchObject({
      spawned_from_jid: jid,
      klass: "Report",
      priority: 4,
      retries: 2,
      tags: ["nightly"],
      data: '{"to": "ops"}',
    });
    expect(popped.map((job: { history: Array<{ when: number }> }) => job.history[0]?.when)).toEqual([now, now + 60]);
    expect(sqlRow(`${jid}-2`)).toMatchObject({ name: "Report", status: "processing", sy_queue: queue, sy_priority: 4 });
    expect(sqlRecurrence(jid)).toMatchObject({ count: 2, next_at: (now + 120) * 1000 });
    // The third is due as well; the queue shows the definition, and unrecur removes it.
    expect((await qless("queues", { now: now + 125, args: [queue] })).json.reply).toMatchObject({ recurring: 1, running: 2 });
    expect((await qless("jobs", { now: now + 125, args: ["recurring", queue] })).json.reply).toEqual([jid]);
    expect((await qless("peek", { now: now + 125, args: [queue, 5] })).json.reply.map((job: { jid: string }) => job.jid)).toEqual([
      `${jid}-3`,
    ]);
    expect((await qless("unrecur", { queue, args: [jid] })).json.reply).toBe(1);
    expect(sqlRecurrence(jid)).toBeUndefined();
    expect((await qless("pop", { now: now + 1000, args: [queue, "w", 5] })).json.reply.map((job: { jid: string }) => job.jid)).toEqual([
      `${jid}-3`,
    ]);
  });

  it("recur.update, recur.tag and recur.untag change the definition; a missing one is qless's error", async () => {
    const queue = unique("sql");
    const jid = unique("rec");
    await qless("recur", { args: [queue, jid, "K", "{}", "interval", 60, 30] });
    const update = await qless("recur.update", { queue, args: [jid, "interval", 10, "klass", "K2", "data", '{"a": 1}'] });
    expect(update.json).toEqual({ reply: 1 });
    expect(sqlRecurrence(jid)).toMatchObject({ name: "K2", data: '{"a":1}', interval_ms: 10_000 });
    expect((await qless("recur.tag", { queue, args: [jid, "x", "y", "x"] })).json.reply).toEqual(["x", "y"]);
    expect((await qless("recur.untag", { queue, args: [jid, "x"] })).json.reply).toEqual(["y"]);
    const view = (await qless("recur.get", { queue, args: [jid] })).json.reply;
    expect(view).toMatchObject({ klass: "K2", interval: 10, data: '{"a": 1}', tags: ["y"] });
    const bogus = await qless("recur.update", { queue, args: [jid, "bogus", 1] });
    expect(bogus.status).toBe(400);
    expect(bogus.json.error).toEqual({ code: "QLESS_ERROR", message: 'Recur(): Unrecognized option "bogus"' });
    const missing = await qless("recur.update", { queue, args: ["no-such-recurrence", "priority", 1] });
    expect(missing.json.error).toEqual({ code: "QLESS_ERROR", message: "Recur(): No recurring job no-such-recurrence" });
    expect((await qless("recur.get", { queue, args: ["no-such-recurrence"] })).json).toEqual({ reply: null });
  });
});

describe("qless door picks the backend of a jid-only command", () => {
  it("with two qless-redis backends, a jid-only command needs a queue and then runs on that queue's backend", async () => {
    const twoQless = await createGateway({
      config: {
        backends: { ql1: { type: "qless-redis", url: redisUrl }, ql2: { type: "qless-redis", url: redisUrl } },
        routes: [
          { pattern: "one-*", backend: "ql1" },
          { pattern: "*", backend: "ql2" },
        ],
      },
      env: {},
    });
    try {
      const jid = unique("jid");
      const queue = unique("one");
      await send(twoQless, "POST", "/qless/put", { args: ["c", queue, jid, "K", "{}", 0] });
      const ambiguous = await send(twoQless, "POST", "/qless/get", { args: [jid] });
      expect(ambiguous.status).toBe(400);
      expect(ambiguous.json.error.message).toMatch(/2 qless-redis backends are configured \(ql1, ql2\)/);
      const get = await send(twoQless, "POST", "/qless/get", { queue, args: [jid] });
      expect(get.json.reply).toMatchObject({ jid, queue, state: "waiting" });
    } finally {
      await twoQless.close();
    }
  });

  it("with no qless-redis backend, a jid-only command without a queue answers 400 asking for one", async () => {
    const sqlOnly = await createGateway({
      config: { backends: { main: { type: "workerqueue-sql", url: `sqlite:${join(dir, "only.sqlite")}` } } },
      env: {},
    });
    try {
      const res = await send(sqlOnly, "POST", "/qless/get", { args: ["some-jid"] });
      expect(res.status).toBe(400);
      expect(res.json.error.message).toMatch(/no qless-redis backend is configured: send "queue" in the body/);
    } finally {
      await sqlOnly.close();
    }
  });
});
