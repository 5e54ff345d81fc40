import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { type Socket, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { qlessScriptSource } from "@switchyard/qless-redis";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";

/**
 * The RESP door with ioredis and raw sockets, on a SQLite backend: qless's script loaded and called as
 * a qless client calls it, the jobs probed in the SQLite table itself, the connection commands, the
 * tokens, and bad input that must never stop the door or store half a job.
 */
let dir: string;
let file: string;
let server: RunningServer;
let secured: RunningServer;
const QLESS = qlessScriptSource();
const QLESS_SHA = createHash("sha1").update(QLESS).digest("hex");
const clients: Redis[] = [];

const client = (port: number, options: Record<string, unknown> = {}) => {
  const redis = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0, ...options });
  clients.push(redis);
  return redis;
};
const rows = (queue: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare("select * from jobs where sy_queue = ? order by id").all(queue) as Array<Record<string, unknown>>;
  } finally {
    db.close();
  }
};
const now = () => String(Date.now() / 1000);

/** Raw bytes in, the bytes the door answers until it closes the connection or `until` matches. */
function rawExchange(port: number, bytes: Buffer | string, until?: RegExp): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket: Socket = connect(port, "127.0.0.1");
    let text = "";
    const done = (closed: boolean) => {
      socket.destroy();
      resolve({ text, closed });
    };
    socket.on("data", (chunk) => {
      text += chunk.toString("utf8");
      if (until?.test(text)) done(false);
    });
    socket.on("close", () => done(true));
    socket.on("error", () => done(true));
    socket.write(bytes);
    setTimeout(() => done(false), 5_000);
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-resp-"));
  file = join(dir, "resp.sqlite");
  const backends = { main: { type: "workerqueue-sql", url: `sqlite:${file}` } };
  server = await startServer({ config: { backends, doors: { resp: { port: 0 } } }, port: 0, host: "127.0.0.1", env: {} });
  secured = await startServer({
    config: {
      backends,
      doors: { resp: { port: 0 } },
      auth: {
        tokens: [
          { name: "worker", token: "env:WORKER", access: "write", queues: ["mail*"] },
          { name: "viewer", token: "env:VIEWER", access: "read" },
        ],
      },
    },
    port: 0,
    host: "127.0.0.1",
    env: { WORKER: "worker-token", VIEWER: "viewer-token" },
  });
});
afterAll(async () => {
  for (const redis of clients) redis.disconnect();
  await Promise.all([server?.close(), secured?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

describe("the RESP door", () => {
  it("loads qless's script and runs put, pop, heartbeat and complete onto SQLite, as a qless client calls them", async () => {
    const redis = client(server.respPort as number);
    await redis.connect();
    expect(await redis.ping()).toBe("PONG");
    expect(await redis.script("LOAD", QLESS)).toBe(QLESS_SHA);
    expect(await redis.script("EXISTS", QLESS_SHA, "0".repeat(40))).toEqual([1, 0]);

    const jid = "resp-job-1";
    const put = await redis.evalsha(QLESS_SHA, 0, "put", now(), "producer", "mail", jid, "Mailer", '{"to":"a@b.c"}', 0);
    expect(put).toBe(jid);
    const [row] = rows("mail");
    expect(row).toMatchObject({ sy_job_id: jid, name: "Mailer", status: "pending" });
    expect(JSON.parse(String(row?.data))).toEqual({ to: "a@b.c" });

    const popped = JSON.parse((await redis.evalsha(QLESS_SHA, 0, "pop", now(), "mail", "worker-1", 1)) as string);
    expect(popped).toHaveLength(1);
    expect(popped[0]).toMatchObject({ jid, queue: "mail", klass: "Mailer", worker: "worker-1", state: "running" });
    expect(rows("mail")[0]).toMatchObject({ status: "processing", sy_worker: "worker-1" });

    // qless answers a heartbeat with the new expiry, a Lua number that Redis truncates to an integer.
    const expires = await redis.evalsha(QLESS_SHA, 0, "heartbeat", now(), jid, "worker-1", "{}");
    expect(typeof expires).toBe("number");
    expect(expires as number).toBeGreaterThan(Date.now() / 1000);
    expect(await redis.evalsha(QLESS_SHA, 0, "complete", now(), jid, "worker-1", "mail", "{}")).toBe("complete");
    expect(rows("mail")[0]).toMatchObject({ status: "complete" });

    const got = JSON.parse((await redis.evalsha(QLESS_SHA, 0, "get", now(), jid)) as string);
    expect(got).toMatchObject({ jid, state: "complete" });
    // An empty pop is `{}`, as Lua's cjson writes an empty table.
    expect(await redis.evalsha(QLESS_SHA, 0, "pop", now(), "mail", "worker-1", 1)).toBe("{}");
  });

  it("answers qless's own errors, NOSCRIPT, and an error naming any command it does not serve", async () => {
    const redis = client(server.respPort as number);
    await redis.connect();
    await expect(redis.evalsha("f".repeat(40), 0, "get", now(), "x")).rejects.toThrow(/^NOSCRIPT/);
    await redis.script("LOAD", QLESS);
    await expect(redis.evalsha(QLESS_SHA, 0, "launch", now())).rejects.toThrow("Unknown command launch");
    await expect(redis.evalsha(QLESS_SHA, 1, "ql:j:x", "get", now(), "x")).rejects.toThrow("No Keys should be provided");
    await expect(redis.evalsha(QLESS_SHA, 0, "complete", now(), "no-such-jid", "w", "mail", "{}")).rejects.toThrow(/no-such-jid/);
    await expect(redis.get("ql:j:x")).rejects.toThrow(/'get' is not served/);
    // glide-mq's functions answer as on a Redis where its library is not loaded yet (resp-glidemq.test.ts loads it).
    await expect(redis.call("FCALL", "glidemq_addJob", 0)).rejects.toThrow(/^ERR Function not found/);
    await expect(redis.script("LOAD", "return 1")).rejects.toThrow(/not qless-core's/);
    await expect(redis.eval("return redis.call('flushall')", 0)).rejects.toThrow(/not qless-core's/);
    expect(await redis.ping()).toBe("PONG");
  });

  it("answers qless's settings, its words for a job no store holds, and store-wide commands from the gateway's one store", async () => {
    const redis = client(server.respPort as number);
    await redis.connect();
    await redis.script("LOAD", QLESS);
    // Settings: kept by the gateway for a store that is not qless-redis, read by the next pop.
    expect(await redis.evalsha(QLESS_SHA, 0, "config.set", now(), "wide-heartbeat", 300)).toBeNull();
    expect(await redis.evalsha(QLESS_SHA, 0, "config.get", now(), "wide-heartbeat")).toBe("300");
    expect(await redis.evalsha(QLESS_SHA, 0, "config.get", now(), "grace-period")).toBe(10);
    expect(JSON.parse((await redis.evalsha(QLESS_SHA, 0, "config.get", now())) as string)).toMatchObject({ heartbeat: 60 });
    await redis.evalsha(QLESS_SHA, 0, "put", now(), "producer", "wide", "wide-1", "K", "{}", 0);
    const before = Date.now() / 1000;
    const [popped] = JSON.parse((await redis.evalsha(QLESS_SHA, 0, "pop", now(), "wide", "w", 1)) as string);
    expect(Math.round(popped.expires - before)).toBe(300);
    // A jid no store holds: qless's own message, nothing written.
    await expect(redis.evalsha(QLESS_SHA, 0, "heartbeat", now(), "nowhere-1", "w", "{}")).rejects.toThrow(
      "Heartbeat(): Job nowhere-1 does not exist",
    );
    await expect(redis.evalsha(QLESS_SHA, 0, "fail", now(), "nowhere-1", "w", "g", "m", "{}")).rejects.toThrow(
      "Fail(): Job nowhere-1does not exist",
    );
    expect(rows("wide").map((row) => row.sy_job_id)).toEqual(["wide-1"]);
    // cancel takes each jid where a store holds it and ignores the rest, answering the jids given.
    await redis.evalsha(QLESS_SHA, 0, "put", now(), "producer", "wide-other", "wide-2", "K", "{}", 0);
    expect(await redis.evalsha(QLESS_SHA, 0, "cancel", now(), "nowhere-2", "wide-2")).toEqual(["nowhere-2", "wide-2"]);
    expect(rows("wide-other").map((row) => [row.sy_job_id, row.status])).toEqual([["wide-2", "error"]]);
    expect(await redis.evalsha(QLESS_SHA, 0, "get", now(), "wide-2")).toBeNull();
    // Commands about the whole store: its queues, its completed jobs, its tags.
    await redis.evalsha(QLESS_SHA, 0, "complete", now(), "wide-1", "w", "wide", "{}");
    const queues = JSON.parse((await redis.evalsha(QLESS_SHA, 0, "queues", now())) as string) as Array<{ name: string }>;
    expect(queues.map((queue) => queue.name)).toContain("wide");
    expect(await redis.evalsha(QLESS_SHA, 0, "jobs", now(), "complete")).toContain("wide-1");
    await expect(redis.evalsha(QLESS_SHA, 0, "jobs", now(), "running")).rejects.toThrow('Jobs(): Arg "queue" missing');
    // The workers the gateway saw pop, with the jobs they hold (w's only job is complete by now).
    expect(JSON.parse((await redis.evalsha(QLESS_SHA, 0, "workers", now())) as string)).toContainEqual({ name: "w", jobs: 0, stalled: 0 });
    // The queue's statistics for today, as qless counts them: wide-1 waited once and ran once.
    const stats = JSON.parse((await redis.evalsha(QLESS_SHA, 0, "stats", now(), "wide", now())) as string);
    expect(stats).toMatchObject({ retries: 0, failed: 0, failures: 0, wait: { count: 1 }, run: { count: 1 } });
    // A recurring job: kept by the store, found by its jid alone, its first instance added at the next pop.
    expect(await redis.evalsha(QLESS_SHA, 0, "recur", now(), "wide", "wide-r", "K", "{}", "interval", 60, 0)).toBe("wide-r");
    expect(JSON.parse((await redis.evalsha(QLESS_SHA, 0, "recur.get", now(), "wide-r")) as string)).toMatchObject({
      queue: "wide",
      count: 0,
    });
    const [instance] = JSON.parse((await redis.evalsha(QLESS_SHA, 0, "pop", now(), "wide", "w", 1)) as string);
    expect(instance).toMatchObject({ jid: "wide-r-1", spawned_from_jid: "wide-r" });
    expect(rows("wide").find((row) => row.sy_job_id === "wide-r-1")?.status).toBe("processing");
    // qless-py reads a recurring job's next run itself, from its queue's `-recur` sorted set.
    const next = Number(await redis.zscore("ql:q:wide-recur", "wide-r"));
    expect(next).toBeGreaterThan(Number(now()) + 50);
    expect(next).toBeLessThanOrEqual(Number(now()) + 60);
    expect(await redis.zscore("ql:q:other-recur", "wide-r")).toBeNull();
    expect(await redis.evalsha(QLESS_SHA, 0, "unrecur", now(), "wide-r")).toBe(1);
    expect(await redis.evalsha(QLESS_SHA, 0, "recur.get", now(), "wide-r")).toBeNull();
  });

  it("get and multiget read each jid where a store holds it, whatever its queue; a jid none holds is nil or left out", async () => {
    const redis = client(server.respPort as number);
    await redis.connect();
    await redis.script("LOAD", QLESS);
    await redis.evalsha(QLESS_SHA, 0, "put", now(), "producer", "mget-a", "mget-1", "K", '{"n":1}', 0);
    await redis.evalsha(QLESS_SHA, 0, "put", now(), "producer", "mget-b", "mget-2", "K", '{"n":2}', 0);
    const jobs = JSON.parse((await redis.evalsha(QLESS_SHA, 0, "multiget", now(), "mget-2", "nowhere", "mget-1")) as string);
    expect(jobs.map((job: { jid: string; queue: string }) => [job.jid, job.queue])).toEqual([
      ["mget-2", "mget-b"],
      ["mget-1", "mget-a"],
    ]);
    expect(await redis.evalsha(QLESS_SHA, 0, "multiget", now(), "nowhere")).toBe("{}");
    expect(await redis.evalsha(QLESS_SHA, 0, "get", now(), "nowhere")).toBeNull();
    expect(JSON.parse((await redis.evalsha(QLESS_SHA, 0, "get", now(), "mget-2")) as string)).toMatchObject({ queue: "mget-b" });
  });

  it("a timeout spends no retry: a job on its last run is popped again, not failed, and the SQL row's attempts count that run once", async () => {
    const redis = client(server.respPort as number);
    await redis.connect();
    await redis.script("LOAD", QLESS);
    await redis.evalsha(QLESS_SHA, 0, "put", now(), "producer", "tmo", "tmo-1", "K", "{}", 0, "retries", 0);
    await redis.evalsha(QLESS_SHA, 0, "pop", now(), "tmo", "worker-a", 1);
    expect(rows("tmo")[0]).toMatchObject({ status: "processing", attempts: 1 });
    await redis.evalsha(QLESS_SHA, 0, "timeout", now(), "tmo-1");
    expect(JSON.parse((await redis.evalsha(QLESS_SHA, 0, "get", now(), "tmo-1")) as string)).toMatchObject({
      state: "stalled",
      remaining: 0,
    });
    expect(rows("tmo")[0]).toMatchObject({ status: "processing", attempts: 0 });
    const [again] = JSON.parse((await redis.evalsha(QLESS_SHA, 0, "pop", now(), "tmo", "worker-b", 1)) as string);
    expect(again).toMatchObject({ jid: "tmo-1", state: "running", worker: "worker-b", remaining: 0 });
    expect(rows("tmo")[0]).toMatchObject({ status: "processing", attempts: 1, sy_worker: "worker-b" });
    // qless leaves the job in worker-a's set, where `workers` still counts it.
    const workers = JSON.parse((await redis.evalsha(QLESS_SHA, 0, "workers", now())) as string) as Array<{ name: string; jobs: number }>;
    expect(workers.filter((worker) => worker.name.startsWith("worker-")).map((worker) => [worker.name, worker.jobs])).toEqual(
      expect.arrayContaining([
        ["worker-a", 1],
        ["worker-b", 1],
      ]),
    );
  });

  it("the data a worker sends with heartbeat, fail and complete is written onto the job in the SQL row, as qless writes it", async () => {
    const redis = client(server.respPort as number);
    await redis.connect();
    await redis.script("LOAD", QLESS);
    const data = () => JSON.parse(String(rows("wdata").find((row) => row.sy_job_id === "wdata-1")?.data));
    await redis.evalsha(QLESS_SHA, 0, "put", now(), "producer", "wdata", "wdata-1", "K", '{"step":0}', 0);
    await redis.evalsha(QLESS_SHA, 0, "pop", now(), "wdata", "w", 1);
    await redis.evalsha(QLESS_SHA, 0, "heartbeat", now(), "wdata-1", "w", '{"step":1}');
    expect(data()).toEqual({ step: 1 });
    // Refused before anything is written: the data stays.
    await expect(redis.evalsha(QLESS_SHA, 0, "complete", now(), "wdata-1", "w", "wdata", "{bad")).rejects.toThrow(
      "Expected object key string but found invalid token at character 2",
    );
    expect(data()).toEqual({ step: 1 });
    await redis.evalsha(QLESS_SHA, 0, "complete", now(), "wdata-1", "w", "wdata", '{"step":2}');
    expect(data()).toEqual({ step: 2 });
    expect(rows("wdata").map((row) => row.status)).toEqual(["complete"]);
  });

  it("speaks RESP3 after HELLO 3 and Redis's connection commands", async () => {
    const hello = await rawExchange(server.respPort as number, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*1\r\n$4\r\nPING\r\n", /\+PONG\r\n$/);
    expect(hello.text.startsWith("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n")).toBe(true);
    expect(hello.text).toContain("$5\r\nproto\r\n:3\r\n");
    const redis = client(server.respPort as number, { connectionName: "qless-worker", db: 3 });
    await redis.connect();
    expect(await redis.client("GETNAME")).toBe("qless-worker");
    expect(await redis.info()).toContain("loading:0");
    await expect(redis.select(16)).rejects.toThrow("DB index is out of range");
    expect(await rawExchange(server.respPort as number, "*2\r\n$5\r\nHELLO\r\n$1\r\n4\r\n", /\r\n$/)).toMatchObject({
      text: "-NOPROTO unsupported protocol version\r\n",
    });
  });

  it("tells subscribers of ql:log what qless would publish for the jobs it runs", async () => {
    const subscriber = client(server.respPort as number);
    const redis = client(server.respPort as number);
    await Promise.all([subscriber.connect(), redis.connect()]);
    const messages: string[] = [];
    subscriber.on("message", (channel: string, message: string) => channel === "ql:log" && messages.push(message));
    await subscriber.subscribe("ql:log");
    // ioredis refuses other commands itself in subscriber mode; the door does too, for any client.
    const refused = await rawExchange(
      server.respPort as number,
      "*2\r\n$9\r\nSUBSCRIBE\r\n$6\r\nql:log\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\n",
      /^-ERR.*\r\n/m,
    );
    expect(refused.text).toContain("-ERR Can't execute 'get': only (P)SUBSCRIBE");
    await redis.script("LOAD", QLESS);
    await redis.evalsha(QLESS_SHA, 0, "put", now(), "producer", "mail-log", "logged-1", "Mailer", "{}", 0);
    const deadline = Date.now() + 5_000;
    while (messages.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(messages.map((message) => JSON.parse(message))).toContainEqual({ jid: "logged-1", event: "put", queue: "mail-log" });
    // A cancel is told in qless's own words and key order.
    await redis.evalsha(QLESS_SHA, 0, "cancel", now(), "logged-1");
    while (messages.length < 2 && Date.now() < deadline + 5_000) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(messages).toContain('{"jid":"logged-1","queue":"mail-log","event":"canceled","worker":""}');
  });

  it("takes the gateway's tokens through AUTH: none, a wrong one, a read token on a put, another queue", async () => {
    const port = secured.respPort as number;
    // No ready check: it would send INFO, which the door refuses before AUTH, as Redis with a password does.
    const anonymous = client(port, { enableReadyCheck: false });
    await anonymous.connect();
    await expect(anonymous.script("LOAD", QLESS)).rejects.toThrow(/^NOAUTH/);
    await expect(anonymous.auth("wrong-token")).rejects.toThrow(/^WRONGPASS/);

    const viewer = client(port, { password: "viewer-token" });
    await viewer.connect();
    await viewer.script("LOAD", QLESS);
    await expect(viewer.evalsha(QLESS_SHA, 0, "put", now(), "p", "mail", "denied-1", "K", "{}", 0)).rejects.toThrow(/^NOPERM.*needs write/);
    const worker = client(port, { username: "default", password: "worker-token" });
    await worker.connect();
    await expect(worker.evalsha(QLESS_SHA, 0, "put", now(), "p", "reports", "denied-2", "K", "{}", 0)).rejects.toThrow(
      /^NOPERM.*queue "reports"/,
    );
    expect(await worker.evalsha(QLESS_SHA, 0, "put", now(), "p", "mail-secure", "allowed-1", "K", "{}", 0)).toBe("allowed-1");
    expect(rows("mail").map((row) => row.sy_job_id)).not.toContain("denied-1");
    expect(rows("reports")).toEqual([]);
  });

  it("survives garbage, huge frames, 10,000 pipelined commands and clients that leave mid-reply, storing nothing half", async () => {
    const port = server.respPort as number;
    const garbage = await rawExchange(port, randomBytes(4096));
    expect(garbage.closed).toBe(true);
    expect(garbage.text).toMatch(/^-ERR Protocol error/);
    // A frame that announces a huge bulk: the door waits for it, like Redis, and serves everyone else meanwhile.
    const huge = connect(port, "127.0.0.1");
    huge.write("*2\r\n$4\r\nECHO\r\n$2000000000\r\nabc");

    const redis = client(port);
    await redis.connect();
    await redis.script("LOAD", QLESS);
    const pipeline = redis.pipeline();
    for (let i = 0; i < 10_000; i++) pipeline.ping(`p${i}`);
    const answers = (await pipeline.exec()) ?? [];
    expect(answers.map(([, value]) => value)).toEqual(Array.from({ length: 10_000 }, (_, i) => `p${i}`));

    // 300 puts sent at once by a client that is gone before their answers: each job is whole or absent.
    const leaving = client(port);
    await leaving.connect();
    await leaving.script("LOAD", QLESS);
    const puts = leaving.pipeline();
    for (let i = 0; i < 300; i++) puts.evalsha(QLESS_SHA, 0, "put", now(), "p", "mail-left", `left-${i}`, "K", `{"n":${i}}`, 0);
    void puts.exec().catch(() => undefined);
    leaving.disconnect();
    huge.destroy();
    expect(await redis.evalsha(QLESS_SHA, 0, "put", now(), "p", "mail-after", "after-1", "K", "{}", 0)).toBe("after-1");
    for (const row of rows("mail-left")) {
      expect(row.status).toBe("pending");
      expect(JSON.parse(String(row.data))).toEqual({ n: Number(String(row.sy_job_id).slice("left-".length)) });
    }
  });
});
