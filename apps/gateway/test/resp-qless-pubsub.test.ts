import { createHash, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { qlessScriptSource } from "@switchyard/qless-redis";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";
import { everyChannel, send } from "./helpers.js";

/**
 * qless's pub/sub through the RESP door on a SQLite store: the messages qless's script publishes, on
 * the channels and in the words and key order a qless client reads (qless-core's test_events.py), told
 * by the translated commands themselves. A subscriber PSUBSCRIBEs `*`, as qless-core's suite does, and
 * every message of one command must have arrived before the command's reply.
 */
let dir: string;
let file: string;
let server: RunningServer;
const QLESS = qlessScriptSource();
const QLESS_SHA = createHash("sha1").update(QLESS).digest("hex");
const clients: Redis[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-resp-pubsub-"));
  file = join(dir, "door.sqlite");
  server = await startServer({
    config: { backends: { main: { type: "workerqueue-sql", url: `sqlite:${file}` } }, doors: { resp: { port: 0 } } },
    port: 0,
    host: "127.0.0.1",
    env: {},
  });
});
afterAll(async () => {
  for (const redis of clients) redis.disconnect();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const connect = async () => {
  const redis = new Redis({ port: server.respPort as number, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0 });
  clients.push(redis);
  await redis.connect();
  return redis;
};

/** Probe: a job's SQLite row, read from the file. */
function row(jid: string): Record<string, unknown> | undefined {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare("select * from jobs where sy_job_id = ?").get(jid) as Record<string, unknown> | undefined;
  } finally {
    db.close();
  }
}

/**
 * A qless client and a subscriber of every channel. `heard(work)` runs the calls and answers what was
 * published meanwhile: the door writes a command's messages before its reply, so they are all in once
 * a PING sent on the subscriber after the last reply has come back.
 */
async function qlessClient() {
  const redis = await connect();
  const { heard } = await everyChannel(await connect());
  await redis.script("LOAD", QLESS);
  const qless = (command: string, now: number, ...args: Array<string | number>) => redis.evalsha(QLESS_SHA, 0, command, now, ...args);
  return { qless, heard };
}

/** Fresh queue and jid names per test: the tests share one store. */
const names = () => {
  const id = randomUUID().slice(0, 8);
  return { queue: `q-${id}`, jid: `jid-${id}` };
};

describe("the RESP door publishes what qless's script publishes, on a SQLite store", () => {
  it("track and untrack are told on ql:track and ql:untrack with the jid", async () => {
    const { qless, heard } = await qlessClient();
    const { queue, jid } = names();
    await qless("put", 0, "worker", queue, jid, "klass", "{}", 0);
    expect(await heard(() => qless("track", 0, "track", jid))).toEqual([{ channel: "ql:track", data: jid }]);
    expect(await heard(() => qless("track", 0, "untrack", jid))).toEqual([{ channel: "ql:untrack", data: jid }]);
  });

  it("a tracked job's put, pop, failure and cancel are told on ql:log and then on ql:<event>, with who failed it and why", async () => {
    const { qless, heard } = await qlessClient();
    const { queue, jid } = names();
    await qless("put", 0, "worker", queue, jid, "klass", "{}", 0);
    await qless("track", 0, "track", jid);
    expect(await heard(() => qless("put", 0, "worker", queue, jid, "klass", "{}", 0))).toEqual([
      { channel: "ql:log", data: `{"jid":"${jid}","event":"put","queue":"${queue}"}` },
      { channel: "ql:put", data: jid },
    ]);
    expect(await heard(() => qless("pop", 0, queue, "worker", 10))).toEqual([{ channel: "ql:popped", data: jid }]);
    // lua-cjson's key order, and its `\/` for a slash.
    expect(await heard(() => qless("fail", 0, jid, "worker", "grp", "mess/age", "{}"))).toEqual([
      {
        channel: "ql:log",
        data: `{"message":"mess\\/age","jid":"${jid}","group":"grp","event":"failed","worker":"worker"}`,
      },
      { channel: "ql:failed", data: jid },
    ]);
    // A failed job no longer has a worker; canceling it removes it.
    expect(await heard(() => qless("cancel", 0, jid))).toEqual([
      { channel: "ql:log", data: `{"jid":"${jid}","queue":"${queue}","event":"canceled","worker":""}` },
      { channel: "ql:canceled", data: jid },
    ]);
    expect(row(jid)).toBeUndefined();
  });

  it("a tracked job's completion is told on ql:completed before ql:log", async () => {
    const { qless, heard } = await qlessClient();
    const { queue, jid } = names();
    await qless("put", 0, "worker", queue, jid, "klass", "{}", 0);
    await qless("track", 0, "track", jid);
    await qless("pop", 0, queue, "worker", 10);
    expect(await heard(() => qless("complete", 0, jid, "worker", queue, "{}"))).toEqual([
      { channel: "ql:completed", data: jid },
      { channel: "ql:log", data: `{"jid":"${jid}","event":"completed","queue":"${queue}"}` },
    ]);
  });

  it("canceling a running job names its worker on ql:log and tells that worker on ql:w:<worker>", async () => {
    const { qless, heard } = await qlessClient();
    const { queue, jid } = names();
    await qless("put", 0, "worker", queue, jid, "klass", "{}", 0);
    await qless("pop", 0, queue, "wrk", 10);
    const canceled = `{"jid":"${jid}","queue":"${queue}","event":"canceled","worker":"wrk"}`;
    expect(await heard(() => qless("cancel", 0, jid))).toEqual([
      { channel: "ql:log", data: canceled },
      { channel: "ql:w:wrk", data: canceled },
    ]);
  });

  it("a timeout, and a re-put by another worker, tell the worker that held the job it lost its lock", async () => {
    const { qless, heard } = await qlessClient();
    const { queue, jid } = names();
    const lockLost = `{"jid":"${jid}","event":"lock_lost","worker":"worker"}`;
    await qless("put", 0, "worker", queue, jid, "klass", "{}", 0);
    await qless("pop", 0, queue, "worker", 10);
    expect(await heard(() => qless("timeout", 0, jid))).toEqual([
      { channel: "ql:w:worker", data: lockLost },
      { channel: "ql:log", data: lockLost },
    ]);
    await qless("pop", 0, queue, "worker", 10);
    expect(await heard(() => qless("put", 0, "another", queue, jid, "klass", "{}", 0))).toEqual([
      { channel: "ql:log", data: `{"jid":"${jid}","event":"put","queue":"${queue}"}` },
      { channel: "ql:w:worker", data: lockLost },
      { channel: "ql:log", data: lockLost },
    ]);
  });

  it("a retry that exhausts a tracked job's retries is told on ql:failed only, as qless's retry tells nothing on ql:log", async () => {
    const { qless, heard } = await qlessClient();
    const { queue, jid } = names();
    await qless("put", 0, "worker", queue, jid, "klass", "{}", 0, "retries", 0);
    await qless("track", 0, "track", jid);
    await qless("pop", 0, queue, "worker", 10);
    expect(await heard(() => qless("retry", 0, jid, queue, "worker", 0, "group", "message"))).toEqual([
      { channel: "ql:failed", data: jid },
    ]);
    expect(row(jid)).toMatchObject({ status: "error" });
  });

  it("config.set and config.unset are told on ql:log", async () => {
    const { qless, heard } = await qlessClient();
    expect(await heard(() => qless("config.set", 0, "foo", "bar"))).toEqual([
      { channel: "ql:log", data: '{"option":"foo","event":"config_set","value":"bar"}' },
    ]);
    expect(await heard(() => qless("config.unset", 0, "foo"))).toEqual([
      { channel: "ql:log", data: '{"event":"config_unset","option":"foo"}' },
    ]);
  });

  it("a put through another door, delayed or not, reaches ql:log once, from the gateway's event stream", async () => {
    const { heard } = await qlessClient();
    const { queue } = names();
    const log = await heard(async () => {
      for (const body of [
        { name: "klass", data: {} },
        { name: "klass", data: {}, delay: 60_000 },
      ]) {
        const res = await send(server.gateway, "POST", `/v1/queues/${queue}/jobs`, body);
        expect(res.status).toBe(201);
      }
    });
    expect(log.filter(({ channel }) => channel === "ql:log").map(({ data }) => JSON.parse(data))).toEqual([
      { jid: expect.any(String), event: "put", queue },
      { jid: expect.any(String), event: "put", queue },
    ]);
  });
});
