import { createHash, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Backend, BackendUnavailableError } from "@switchyard/core";
import { qlessScriptSource } from "@switchyard/qless-redis";
import { Redis } from "ioredis";
import knexFactory from "knex";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { type RunningServer, startServer } from "../src/server.js";
import { everyChannel, send } from "./helpers.js";

/**
 * qless's jids are global: a `put` naming a jid that another queue holds moves the job (queue.lua's
 * put). Through the qless doors onto stores whose jids are per queue (SQLite, PostgreSQL, glide-mq), the job
 * leaves its old queue, keeps what qless's put keeps, its worker hears lock_lost, and a failure half
 * way leaves it where a put sent again finishes the move. Each rule is checked through the door and
 * in the store (the Backend's own get and list).
 */
const dir = mkdtempSync(join(tmpdir(), "switchyard-qless-move-"));
const table = `qmove_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
const pg = knexFactory({ client: "pg", connection: serviceUrl("postgres") });
const mongoDatabase = `qless_move_${randomUUID().slice(0, 8)}`;
const QLESS = qlessScriptSource();
const QLESS_SHA = createHash("sha1").update(QLESS).digest("hex");
/** The Redis database of the glide-mq store, flushed afterwards. */
const GLIDE_DB = 2;
let server: RunningServer;
const clients: Redis[] = [];

beforeAll(async () => {
  server = await startServer({
    config: {
      backends: {
        lite: { type: "workerqueue-sql", url: `sqlite:${join(dir, "move.sqlite")}` },
        pg: { type: "workerqueue-sql", url: serviceUrl("postgres"), options: { table } },
        mongo: { type: "cloudq-mongo", url: serviceUrl("mongo"), options: { database: mongoDatabase } },
        glide: { type: "glidemq-valkey", url: `${serviceUrl("redis")}/${GLIDE_DB}` },
      },
      routes: [
        { pattern: "pg-*", backend: "pg" },
        { pattern: "glide-*", backend: "glide" },
        { pattern: "mongo-*", backend: "mongo" },
        { pattern: "*", backend: "lite" },
      ],
      doors: { resp: { port: 0 } },
      auth: {
        tokens: [
          { name: "admin", token: "env:ADMIN", access: "admin" },
          { name: "narrow", token: "env:NARROW", access: "write", queues: ["*-open-*"] },
        ],
      },
    },
    port: 0,
    host: "127.0.0.1",
    env: { ADMIN: "admin-token", NARROW: "narrow-token" },
  });
});
afterAll(async () => {
  for (const redis of clients) redis.disconnect();
  await server?.close();
  await pg.schema.dropTableIfExists(table);
  await pg.schema.dropTableIfExists(`${table}_paused_queues`);
  await pg.schema.dropTableIfExists(`${table}_sy_recurring`);
  await pg.destroy();
  const mongo = await new MongoClient(serviceUrl("mongo")).connect();
  await mongo.db(mongoDatabase).dropDatabase();
  await mongo.close();
  const glide = new Redis(`${serviceUrl("redis")}/${GLIDE_DB}`);
  await glide.flushdb();
  glide.disconnect();
  rmSync(dir, { recursive: true, force: true });
});

const STORES = [
  { name: "SQLite", backend: "lite", prefix: "lite" },
  { name: "PostgreSQL", backend: "pg", prefix: "pg" },
] as const;
/**
 * Also glide-mq, whose ids are per queue too and which keeps no list of its queues: its JobLookup
 * finds the queue holding a jid without scanning the keyspace on each put. It holds no tags and edits
 * no job after enqueue, so only the moves those are not part of run there.
 */
const ALSO_GLIDE = [...STORES, { name: "glide-mq (Redis)", backend: "glide", prefix: "glide" }] as const;

async function connect(token = "admin-token") {
  const redis = new Redis({
    port: server.respPort as number,
    host: "127.0.0.1",
    password: token,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
  });
  clients.push(redis);
  await redis.connect();
  return redis;
}

/** A qless client on the RESP door, a subscriber of every channel, and fresh names for one test. */
async function qlessClient(prefix: string, token?: string) {
  const redis = await connect(token);
  await redis.script("LOAD", QLESS);
  const { heard } = await everyChannel(await connect());
  const id = randomUUID().slice(0, 8);
  return {
    queue: `${prefix}-old-${id}`,
    other: `${prefix}-open-${id}`,
    jid: `jid-${id}`,
    qless: (command: string, ...args: Array<string | number>) => redis.evalsha(QLESS_SHA, 0, command, Date.now() / 1000, ...args),
    json: async (command: string, ...args: Array<string | number>) =>
      JSON.parse((await redis.evalsha(QLESS_SHA, 0, command, Date.now() / 1000, ...args)) as string),
    /** What was published while `work` ran. */
    heard,
  };
}

const storeOf = (name: string): Backend => server.gateway.backends.get(name)!.backend;

describe.each(ALSO_GLIDE)("a qless put of a jid another queue holds moves the job, on $name", ({ backend, prefix }) => {
  it("the job leaves the old queue (not peeked, not popped, its row canceled) and waits in the new one", async () => {
    const { queue, other, jid, qless, json } = await qlessClient(prefix);
    expect(await qless("put", "worker", queue, jid, "klass", '{"foo": "bar"}', 0)).toBe(jid);
    expect(await qless("put", "worker", other, jid, "klass", '{"foo": "bar"}', 0)).toBe(jid);
    expect(await json("peek", queue, 10)).toEqual({});
    expect(await json("pop", queue, "worker", 10)).toEqual({});
    expect(await json("get", jid)).toMatchObject({ jid, queue: other, state: "waiting", worker: "" });
    const store = storeOf(backend);
    expect(await store.get(queue, jid)).toMatchObject({ state: "canceled" });
    expect(await store.get(other, jid)).toMatchObject({ state: "waiting", data: { foo: "bar" } });
    expect((await store.list(queue, { state: "waiting" })).items).toEqual([]);
    // The job is popped where it went, once.
    const popped = await json("pop", other, "worker", 10);
    expect(popped.map((job: { jid: string }) => job.jid)).toEqual([jid]);
  });
});

describe.each(STORES)("a qless put of a jid another queue holds moves the job, on $name", ({ backend, prefix }) => {
  it("keeps the priority, tags and retries the put does not give, and takes those it gives (both ways)", async () => {
    const { queue, other, jid, qless, json } = await qlessClient(prefix);
    await qless("put", "worker", queue, jid, "klass", "{}", 0, "priority", 3, "tags", '["foo"]', "retries", 2);
    await qless("put", "worker", other, jid, "Klass2", '{"v":2}', 0);
    expect(await json("get", jid)).toMatchObject({ queue: other, klass: "Klass2", priority: 3, tags: ["foo"], retries: 2, remaining: 2 });
    const store = storeOf(backend);
    expect(await store.get(other, jid)).toMatchObject({ state: "waiting", priority: 3, tags: ["foo"], maxAttempts: 3, data: { v: 2 } });
    // Back into the first queue, whose canceled row takes the job again, with what this put gives.
    await qless("put", "worker", queue, jid, "klass", "{}", 0, "priority", 0, "tags", '["bar"]', "retries", 5);
    expect(await json("get", jid)).toMatchObject({ queue, priority: 0, tags: ["bar"], retries: 5 });
    expect(await store.get(queue, jid)).toMatchObject({ state: "waiting", priority: 0, tags: ["bar"], maxAttempts: 6 });
    expect(await store.get(other, jid)).toMatchObject({ state: "canceled" });
  });

  it("a running job put into another queue by another worker: the log hears the put, its worker lock_lost, and it is no longer that worker's", async () => {
    const { queue, other, jid, qless, json, heard } = await qlessClient(prefix);
    await qless("put", "worker", queue, jid, "klass", "{}", 0);
    await qless("track", "track", jid);
    expect((await json("pop", queue, "worker", 10))[0]).toMatchObject({ jid, worker: "worker" });
    expect(await heard(() => qless("put", "another", other, jid, "klass", "{}", 10))).toEqual([
      { channel: "ql:log", data: `{"jid":"${jid}","event":"put","queue":"${other}"}` },
      { channel: "ql:w:worker", data: `{"jid":"${jid}","event":"lock_lost","worker":"worker"}` },
      { channel: "ql:log", data: `{"jid":"${jid}","event":"lock_lost","worker":"worker"}` },
      // qless tracks the jid: the moved job is still tracked.
      { channel: "ql:put", data: jid },
    ]);
    await expect(qless("complete", jid, "worker", queue, "{}")).rejects.toThrow(
      `Complete(): Job ${jid} is not currently running: scheduled`,
    );
    const store = storeOf(backend);
    expect(await store.get(queue, jid)).toMatchObject({ state: "canceled", lease: null });
    expect(await store.get(other, jid)).toMatchObject({ state: "delayed", lease: null });
  });

  it("a re-put into the same queue keeps the priority, tags and retries it does not give, as qless's put does", async () => {
    const { queue, jid, qless, json } = await qlessClient(prefix);
    await qless("put", "worker", queue, jid, "klass", "{}", 0, "priority", 4, "tags", '["t"]', "retries", 1);
    await qless("put", "worker", queue, jid, "klass", '{"again":true}', 0);
    expect(await json("get", jid)).toMatchObject({ queue, priority: 4, tags: ["t"], retries: 1 });
    expect(await storeOf(backend).get(queue, jid)).toMatchObject({ priority: 4, tags: ["t"], maxAttempts: 2, data: { again: true } });
  });

  it("bad input is refused before anything is written: the job stays where it was", async () => {
    const { queue, other, jid, qless, json } = await qlessClient(prefix);
    await qless("put", "worker", queue, jid, "klass", '{"n":1}', 0, "priority", 2);
    await expect(qless("put", "worker", other, jid, "klass", "{}", 0, "priority", "high")).rejects.toThrow(
      'Put(): Arg "priority" not a numberhigh',
    );
    await expect(qless("put", "worker", other, jid, "klass", "{}", 0, "priority", 5_000_000)).rejects.toThrow(/^ERR VALIDATION/);
    await expect(qless("put", "worker", other, jid, "klass", "not json", 0)).rejects.toThrow(
      "Expected value but found invalid token at character 1",
    );
    // cjson takes inf; JSON, and so the store, cannot hold it.
    await expect(qless("put", "worker", other, jid, "klass", '{"a": inf}', 0)).rejects.toThrow(
      'Put(): Arg "data" holds a number JSON cannot carry (inf) at character 7',
    );
    const store = storeOf(backend);
    expect(await store.get(other, jid)).toBeNull();
    expect(await store.get(queue, jid)).toMatchObject({ state: "waiting", priority: 2, data: { n: 1 } });
    expect(await json("get", jid)).toMatchObject({ queue, state: "waiting" });
    // The same put, well formed, moves it.
    await qless("put", "worker", other, jid, "klass", "{}", 0);
    expect(await store.get(queue, jid)).toMatchObject({ state: "canceled" });
    expect(await store.get(other, jid)).toMatchObject({ state: "waiting", priority: 2 });
  });

  it("a store failure between the two writes leaves the job in both queues, never in neither; the put sent again finishes the move", async () => {
    const { queue, other, jid, qless } = await qlessClient(prefix);
    await qless("put", "worker", queue, jid, "klass", "{}", 0, "priority", 6);
    const store = storeOf(backend);
    const cancel = store.cancel;
    store.cancel = async () => {
      throw new BackendUnavailableError("the store went away between the two writes");
    };
    try {
      await expect(qless("put", "worker", other, jid, "klass", '{"v":2}', 0)).rejects.toThrow(/went away/);
    } finally {
      store.cancel = cancel;
    }
    expect(await store.get(queue, jid)).toMatchObject({ state: "waiting", priority: 6 });
    expect(await store.get(other, jid)).toMatchObject({ state: "waiting", priority: 6, data: { v: 2 } });
    expect(await qless("put", "worker", other, jid, "klass", '{"v":2}', 0)).toBe(jid);
    expect(await store.get(queue, jid)).toMatchObject({ state: "canceled" });
    expect(await store.get(other, jid)).toMatchObject({ state: "waiting", priority: 6, data: { v: 2 } });
    expect((await store.list(other, { state: "waiting" })).items.map((job) => job.id)).toEqual([jid]);
  });

  it("a token that may not touch the old queue cannot move a job out of it, on the RESP door and the HTTP door", async () => {
    const admin = await qlessClient(prefix);
    const narrow = await qlessClient(prefix, "narrow-token");
    await admin.qless("put", "worker", admin.queue, admin.jid, "klass", "{}", 0);
    await expect(narrow.qless("put", "worker", admin.other, admin.jid, "klass", "{}", 0)).rejects.toThrow(
      new RegExp(`^NOPERM.*queue "${admin.queue}"`),
    );
    const http = await send(
      server.gateway,
      "POST",
      "/qless/put",
      { args: ["worker", admin.other, admin.jid, "klass", "{}", 0] },
      { Authorization: "Bearer narrow-token" },
    );
    expect(http.status).toBe(403);
    expect(http.text.replaceAll('\\"', '"')).toContain(`may not use queue "${admin.queue}"`);
    const store = storeOf(backend);
    expect(await store.get(admin.other, admin.jid)).toBeNull();
    expect(await store.get(admin.queue, admin.jid)).toMatchObject({ state: "waiting" });
  });
});

describe("a qless put over HTTP moves the job as over RESP", () => {
  it.each(ALSO_GLIDE)("on $name: the old row canceled, the new one waiting with the old priority", async ({ backend, prefix }) => {
    const id = randomUUID().slice(0, 8);
    const [queue, other, jid] = [`${prefix}-h-${id}`, `${prefix}-h2-${id}`, `jid-${id}`];
    const put = (into: string, ...options: Array<string | number>) =>
      send(
        server.gateway,
        "POST",
        "/qless/put",
        { args: ["worker", into, jid, "klass", "{}", 0, ...options] },
        { Authorization: "Bearer admin-token" },
      );
    expect((await put(queue, "priority", 8)).json).toEqual({ reply: jid });
    expect((await put(other)).json).toEqual({ reply: jid });
    const store = storeOf(backend);
    expect(await store.get(queue, jid)).toMatchObject({ state: "canceled" });
    expect(await store.get(other, jid)).toMatchObject({ state: "waiting", priority: 8 });
  });
});

describe("a qless put moves a job on a store whose dependencies hold within one queue (Cloudq on MongoDB)", () => {
  it("a job waiting on others is not moved without new dependencies (501, nothing written); a plain one is", async () => {
    const { queue, other, jid, qless } = await qlessClient("mongo");
    const [parent, plain] = [`${jid}-parent`, `${jid}-plain`];
    await qless("put", "worker", queue, parent, "klass", "{}", 0);
    await qless("put", "worker", queue, jid, "klass", "{}", 0, "depends", JSON.stringify([parent]));
    await qless("put", "worker", queue, plain, "klass", "{}", 0);
    await expect(qless("put", "worker", other, jid, "klass", "{}", 0)).rejects.toThrow(/^ERR UNSUPPORTED: .*would lose its dependencies/);
    const store = storeOf("mongo");
    expect(await store.get(queue, jid)).toMatchObject({ state: "blocked", dependsOn: [parent] });
    expect(await store.get(other, jid)).toBeNull();
    // Its dependencies can change in its own queue (DependencyEditing), which does not move it.
    expect(await qless("depends", jid, "on", plain)).toBe(1);
    expect(await store.get(queue, jid)).toMatchObject({ state: "blocked", dependsOn: [parent, plain] });
    expect(await qless("depends", jid, "off", plain)).toBe(1);
    expect(await store.get(queue, jid)).toMatchObject({ state: "blocked", dependsOn: [parent] });
    expect(await qless("put", "worker", other, plain, "klass", "{}", 0)).toBe(plain);
    expect(await store.get(queue, plain)).toMatchObject({ state: "canceled" });
    expect(await store.get(other, plain)).toMatchObject({ state: "waiting" });
  });
});

describe.each(STORES)("qless's complete with next moves the job on, on $name", ({ backend, prefix }) => {
  it("into another queue: completed there, waiting here under its jid with the worker's data, its runs counted afresh", async () => {
    const { queue, other, jid, qless, json, heard } = await qlessClient(prefix);
    await qless("put", "worker", queue, jid, "klass", '{"v": 1}', 0, "priority", 4, "retries", 2, "tags", '["t"]');
    await json("pop", queue, "worker", 1);
    const told = await heard(async () => expect(await qless("complete", jid, "worker", queue, '{"v": 2}', "next", other)).toBe("waiting"));
    expect(told).toContainEqual({ channel: "ql:log", data: JSON.stringify({ jid, to: other, event: "advanced", queue }) });
    const store = storeOf(backend);
    expect(await store.get(queue, jid)).toBeNull();
    expect(await store.get(other, jid)).toMatchObject({
      state: "waiting",
      data: { v: 2 },
      priority: 4,
      maxAttempts: 3,
      attempts: 0,
      tags: ["t"],
    });
    expect(await json("get", jid)).toMatchObject({ queue: other, state: "waiting", data: '{"v":2}', remaining: 2, worker: "" });
    const popped = await json("pop", other, "worker", 10);
    expect(popped.map((job: { jid: string }) => job.jid)).toEqual([jid]);
  });

  it("into its own queue after a delay: put again there, scheduled", async () => {
    const { queue, jid, qless, json } = await qlessClient(prefix);
    await qless("put", "worker", queue, jid, "klass", "{}", 0);
    await json("pop", queue, "worker", 1);
    expect(await qless("complete", jid, "worker", queue, "{}", "next", queue, "delay", 60)).toBe("scheduled");
    const job = await storeOf(backend).get(queue, jid);
    expect(job).toMatchObject({ state: "delayed", attempts: 0, lease: null });
    expect(job?.runAt).toBeGreaterThan(Date.now() + 50_000);
  });

  it("by a worker that does not hold the job: qless's refusal, nothing moved", async () => {
    const { queue, other, jid, qless, json } = await qlessClient(prefix);
    await qless("put", "worker", queue, jid, "klass", "{}", 0);
    await json("pop", queue, "worker", 1);
    await expect(qless("complete", jid, "thief", queue, "{}", "next", other)).rejects.toThrow(/handed out to another worker/);
    await expect(qless("complete", jid, "worker", queue, "{}", "delay", 5)).rejects.toThrow(/"delay" cannot be used without a "next"/);
    expect(await storeOf(backend).get(queue, jid)).toMatchObject({ state: "active" });
    expect(await storeOf(backend).get(other, jid)).toBeNull();
  });
});

describe("qless's complete with next on a store that edits no job after enqueue (glide-mq)", () => {
  it("into its own queue answers 501 before the job is completed", async () => {
    const { queue, jid, qless, json } = await qlessClient("glide");
    await qless("put", "worker", queue, jid, "klass", "{}", 0);
    await json("pop", queue, "worker", 1);
    await expect(qless("complete", jid, "worker", queue, "{}", "next", queue)).rejects.toThrow(/^ERR UNSUPPORTED: .*cannot/);
    expect(await storeOf("glide").get(queue, jid)).toMatchObject({ state: "active" });
  });
});
