import { eventually } from "@switchyard/conformance";
import { type Job, completeAndReserve } from "@switchyard/core";
import type { Redis } from "ioredis";
import { Redis as RedisClient } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type QlessBackend,
  QlessScriptError,
  callQless,
  createQlessBackend,
  qlessErrorMessage,
  qlessLibrary,
  qlessScript,
} from "../src/index.js";
import { type PrivateRedis, startPrivateRedis } from "./helpers/private-redis.js";

// The native layout as qless clients read it. A private server: these rules look at server-wide
// state (SCRIPT FLUSH, pub/sub) that other test files must not see.
let server: PrivateRedis;
let redis: Redis;
let backend: QlessBackend;
const unique = () => Math.random().toString(36).slice(2, 10);

beforeAll(async () => {
  server = await startPrivateRedis();
  redis = server.connect();
  backend = createQlessBackend({ redis });
  await backend.ready();
});

afterAll(async () => {
  await backend?.close();
  await server?.stop();
});

/** A job as another store would export it. */
function importable(overrides: Partial<Job>): Job {
  return {
    id: `imp-${unique()}`,
    queue: "elsewhere",
    name: "charge",
    data: {},
    state: "waiting",
    priority: 0,
    runAt: null,
    attempts: 0,
    maxAttempts: 3,
    backoff: null,
    lease: null,
    createdAt: Date.now() - 60_000,
    startedAt: null,
    finishedAt: null,
    result: null,
    error: null,
    progress: null,
    tags: [],
    dependsOn: [],
    uniqueKey: null,
    native: {},
    ...overrides,
  };
}

const history = async (jid: string) => (await redis.lrange(`ql:j:${jid}-history`, 0, -1)).map((entry) => JSON.parse(entry));

describe("qless-redis native layout", () => {
  it("enqueue writes the ql:j hash, history and work score exactly as qless's put does", async () => {
    const queue = `lq-${unique()}`;
    const before = Date.now() / 1000;
    const { job } = await backend.enqueue(queue, { name: "my.Klass", data: { a: 1 }, priority: 5 });
    const hash = await redis.hgetall(`ql:j:${job.id}`);
    expect(hash).toMatchObject({
      jid: job.id,
      klass: "my.Klass",
      data: '{"a":1}',
      priority: "5",
      tags: "{}",
      state: "waiting",
      worker: "",
      expires: "0",
      queue,
      retries: "2",
      remaining: "2",
    });
    expect(hash.time).toMatch(/^\d{10}\.\d{20}$/);
    expect(Object.keys(hash).sort()).toEqual(
      ["data", "expires", "jid", "klass", "priority", "queue", "remaining", "retries", "state", "tags", "time", "worker"].sort(),
    );
    const score = Number(await redis.zscore(`ql:q:${queue}-work`, job.id));
    expect(score).toBeCloseTo(5 - Number(hash.time) / 1e10, 12);
    expect(await history(job.id)).toEqual([[Math.floor(Number(hash.time)), "put", { q: queue }]]);
    expect(Number(await redis.zscore("ql:queues", queue))).toBeGreaterThanOrEqual(Math.floor(before));
    expect(job.id).toMatch(/^[0-9a-f]{32}$/);
  });

  it("a new job's enqueue writes what qless's own put writes at the same time: hash, history, scores, tag sets, messages", async () => {
    const dump = async (jid: string, queue: string, tag: string) => {
      const hash = await redis.hgetall(`ql:j:${jid}`);
      return {
        hash: { ...hash, jid: "<jid>", queue: "<queue>" },
        history: (await history(jid)).map(([when, what, details]) => [when, what, { ...details, q: "<queue>" }]),
        work: await redis.zscore(`ql:q:${queue}-work`, jid),
        scheduled: await redis.zscore(`ql:q:${queue}-scheduled`, jid),
        tagged: await redis.zscore(`ql:t:${tag}`, jid),
        queued: await redis.zscore("ql:queues", queue),
      };
    };
    const listener = server.connect();
    const heard: string[] = [];
    await listener.psubscribe("ql:*");
    listener.on("pmessage", (_pattern, channel, message) => heard.push(`${channel} ${message}`));
    for (const delay of [0, 30]) {
      const [ours, theirs, tag] = [`ea-${unique()}`, `eb-${unique()}`, `tag-${unique()}`];
      const input = { name: "my.Klass", data: { n: 1 }, priority: 3, tags: [tag], maxAttempts: 4 };
      const { job } = await backend.enqueue(ours, delay > 0 ? { ...input, delay: delay * 1000 } : input);
      const time = (await redis.hget(`ql:j:${job.id}`, "time")) as string;
      // qless's put of the same job at the same time, into a queue of its own.
      const jid = `put-${unique()}`;
      const putDelay = delay > 0 ? String(Number(job.runAt) / 1000 - Number(time)) : "0";
      await backend.qless("put", time, "", theirs, jid, "my.Klass", '{"n":1}', putDelay, "priority", 3, "tags", `["${tag}"]`, "retries", 3);
      const [a, b] = [await dump(job.id, ours, tag), await dump(jid, theirs, tag)];
      expect(a).toEqual({ ...b, queued: a.queued });
      expect(a.queued).not.toBeNull();
      expect(delay > 0 ? a.scheduled : a.work).not.toBeNull();
      await eventually(async () => heard.some((line) => line.includes(jid)), "qless's put message");
      const told = (id: string, queue: string) =>
        heard.filter((line) => line.includes(id)).map((line) => line.replace(id, "<jid>").replace(queue, "<queue>"));
      expect(told(job.id, ours)).toEqual(told(jid, theirs));
    }
    listener.disconnect();
  });

  it("reserve takes the qless lock: locks zset, worker's jobs zset, ql:workers, popped history", async () => {
    const queue = `lq-${unique()}`;
    const { job } = await backend.enqueue(queue, { name: "k" });
    const [reserved] = await backend.reserve(queue, { worker: "host-1", leaseMs: 30_000 });
    const expires = Number(await redis.hget(`ql:j:${job.id}`, "expires"));
    // The pop reply is cjson's, which writes numbers with 14 significant digits ("%.14g"):
    // the lease carries the lock's expiry as qless hands it to its own workers, not the
    // hash's 17 digits (rounding both to the millisecond differs in about one run in 20).
    expect(reserved?.lease?.expiresAt).toBe(Math.round(Number(expires.toPrecision(14)) * 1000));
    expect(Number(await redis.zscore(`ql:q:${queue}-locks`, job.id))).toBe(expires);
    expect(Number(await redis.zscore("ql:w:host-1:jobs", job.id))).toBe(expires);
    expect(await redis.zscore("ql:workers", "host-1")).not.toBeNull();
    expect(await redis.zscore(`ql:q:${queue}-work`, job.id)).toBeNull();
    expect(await redis.hmget(`ql:j:${job.id}`, "state", "worker")).toEqual(["running", "host-1"]);
    expect((await history(job.id)).map((entry) => entry[1])).toEqual(["put", "popped"]);
  });

  it("fail with attempts left is qless's retry; the last failure lands in ql:f:<group> and the day's stats", async () => {
    const queue = `lq-${unique()}`;
    const { job } = await backend.enqueue(queue, { name: "k", maxAttempts: 2 });
    await backend.reserve(queue, { worker: "w" });
    const retried = await backend.fail(queue, job.id, { worker: "w", error: { group: "k:Boom", message: "boom" } });
    expect(retried).toMatchObject({ state: "waiting", attempts: 1, error: { group: "k:Boom", message: "boom" } });
    expect(await redis.hmget(`ql:j:${job.id}`, "state", "remaining")).toEqual(["waiting", "0"]);
    await backend.reserve(queue, { worker: "w" });
    const failed = await backend.fail(queue, job.id, { worker: "w", error: { message: "again" } });
    expect(failed).toMatchObject({ state: "failed", attempts: 2, error: { group: `${queue}-error`, message: "again" } });
    expect(await redis.lrange(`ql:f:${queue}-error`, 0, -1)).toEqual([job.id]);
    expect(await redis.sismember("ql:failures", `${queue}-error`)).toBe(1);
    expect(JSON.parse((await redis.hget(`ql:j:${job.id}`, "failure")) as string)).toMatchObject({
      group: `${queue}-error`,
      message: "again",
    });
    const day = Math.floor(Date.now() / 1000 / 86400) * 86400;
    expect(await redis.hget(`ql:s:stats:${day}:${queue}`, "failed")).toBe("1");
  });

  it("complete keeps the job's data and stores the result in its own field", async () => {
    const queue = `lq-${unique()}`;
    const { job } = await backend.enqueue(queue, { name: "k", data: { keep: true } });
    await backend.reserve(queue, { worker: "w" });
    const done = await backend.complete(queue, job.id, { worker: "w", result: { sum: 3 } });
    expect(done).toMatchObject({ state: "completed", data: { keep: true }, result: { sum: 3 } });
    expect(await redis.hmget(`ql:j:${job.id}`, "state", "queue", "data", "switchyard.result")).toEqual([
      "complete",
      "",
      '{"keep":true}',
      '{"sum":3}',
    ]);
    expect(await redis.zscore("ql:completed", job.id)).not.toBeNull();
    expect(await backend.get(queue, job.id)).toMatchObject({ state: "completed", queue });
  });

  it.each([
    ["jobs-history-count", 0],
    ["jobs-history", 0],
  ])(
    "complete answers the completed job even when qless prunes it at once (%s %i), and so does completeAndReserve",
    async (option, value) => {
      const queue = `lq-${unique()}`;
      await backend.qless("config.set", Date.now() / 1000, option, value);
      try {
        const [first, second] = await backend.enqueueBulk(queue, [
          { name: "k", data: { x: 1 } },
          { name: "k", data: { x: 2 } },
        ]);
        await backend.reserve(queue, { worker: "w", count: 2 });
        const done = await backend.complete(queue, first!.job.id, { worker: "w", result: 7 });
        expect(done).toMatchObject({ id: first!.job.id, state: "completed", data: { x: 1 }, result: 7, lease: null });
        expect(await redis.exists(`ql:j:${first!.job.id}`)).toBe(0);
        const both = await completeAndReserve(backend, queue, second!.job.id, { worker: "w" }, { worker: "w" });
        expect(both).toMatchObject({ completed: { id: second!.job.id, state: "completed", data: { x: 2 } }, next: [] });
        expect(await redis.exists(`ql:j:${second!.job.id}`)).toBe(0);
      } finally {
        await backend.qless("config.unset", Date.now() / 1000, option);
      }
    },
  );

  it("complete answers the completed job that qless prunes because later completions fill jobs-history-count", async () => {
    const queue = `lq-${unique()}`;
    const now = Date.now() / 1000;
    const [early, late] = await backend.enqueueBulk(queue, [{ name: "early" }, { name: "late" }]);
    await backend.reserve(queue, { worker: "w", count: 2 });
    // Completed an hour ahead (another client's clock), `late` ranks above every completion made now.
    await backend.qless("complete", now + 3600, late!.job.id, "w", queue, "{}");
    await backend.qless("config.set", now, "jobs-history-count", 1);
    try {
      const done = await backend.complete(queue, early!.job.id, { worker: "w", result: "kept" });
      expect(done).toMatchObject({ id: early!.job.id, state: "completed", result: "kept" });
      expect(await redis.exists(`ql:j:${early!.job.id}`)).toBe(0);
      expect(await redis.zscore("ql:completed", late!.job.id)).not.toBeNull();
    } finally {
      await backend.qless("config.unset", now, "jobs-history-count");
    }
  });

  it("Switchyard-only fields are written only for jobs that use them", async () => {
    const queue = `lq-${unique()}`;
    const { job } = await backend.enqueue(queue, { name: "k", uniqueKey: "u-1", backoff: { type: "fixed", delay: 100 } });
    expect(JSON.parse((await redis.hget(`ql:j:${job.id}`, "switchyard.meta")) as string)).toEqual({
      backoff: { type: "fixed", delay: 100 },
      uniqueKey: "u-1",
    });
    expect(await redis.hget(`ql:sy:unique:${queue}`, "u-1")).toBe(job.id);
  });

  it("an expired lease is taken back with qless's handshake: lock_lost to the old worker, then redelivery", async () => {
    const queue = `lq-${unique()}`;
    await backend.qless("config.set", Date.now() / 1000, "grace-period", 0);
    const subscriber = server.connect();
    const messages: [string, string][] = [];
    subscriber.on("message", (channel: string, message: string) => messages.push([channel, message]));
    await subscriber.subscribe("ql:w:old-worker");
    const { job } = await backend.enqueue(queue, { name: "k" });
    await backend.reserve(queue, { worker: "old-worker", leaseMs: 50 });
    const again = await eventually(async () => (await backend.reserve(queue, { worker: "new-worker" }))[0], "redelivery");
    expect(again).toMatchObject({ id: job.id, attempts: 2, lease: { worker: "new-worker" } });
    await eventually(async () => messages.length > 0, "the lock_lost message");
    expect(messages.map(([channel, message]) => [channel, JSON.parse(message)])).toEqual([
      ["ql:w:old-worker", { jid: job.id, event: "lock_lost", worker: "old-worker" }],
    ]);
    expect(await redis.hget(`ql:j:${job.id}`, "remaining")).toBe("1");
    await backend.qless("config.unset", Date.now() / 1000, "grace-period");
    subscriber.disconnect();
  });

  it("import of a job from another system writes qless history so its attempts survive", async () => {
    const queue = `lq-${unique()}`;
    const now = Date.now();
    const foreign: Job = {
      id: `imp-${unique()}`,
      queue: "elsewhere",
      name: "resize",
      data: [1, 2],
      state: "active",
      priority: 2,
      runAt: null,
      attempts: 2,
      maxAttempts: 5,
      backoff: null,
      lease: { worker: "gone", expiresAt: now },
      createdAt: now - 60_000,
      startedAt: now - 1000,
      finishedAt: null,
      result: null,
      error: null,
      progress: null,
      tags: ["t"],
      dependsOn: [],
      uniqueKey: null,
      native: { cloudq: { extra: 1 } },
    };
    expect(await backend.import(queue, [foreign])).toMatchObject({ imported: 1, skipped: [] });
    const job = await backend.get(queue, foreign.id);
    expect(job).toMatchObject({ state: "waiting", attempts: 2, maxAttempts: 5, priority: 2, tags: ["t"], data: [1, 2] });
    expect(job?.native.cloudq).toEqual({ extra: 1 });
    expect(await redis.hmget(`ql:j:${foreign.id}`, "retries", "remaining", "tags")).toEqual(["4", "3", '["t"]']);
    expect((await history(foreign.id)).map((entry) => entry[1])).toEqual(["put", "popped", "popped"]);
    expect(await redis.zscore("ql:t:t", foreign.id)).not.toBeNull();
    expect(await backend.import(queue, [foreign])).toMatchObject({ imported: 0, skipped: [foreign.id] });
    await expect(backend.import(queue, [{ ...foreign, id: "c-1", state: "canceled" }])).rejects.toMatchObject({ code: "UNSUPPORTED" });
  });

  it("import registers a job's unique key in ql:sy:unique:<queue> as enqueue does: a retry with the key gets the imported job", async () => {
    const queue = `lq-${unique()}`;
    const migrated = importable({ state: "waiting", uniqueKey: "order-1" });
    expect(await backend.import(queue, [migrated])).toMatchObject({ imported: 1, skipped: [] });
    expect(await redis.hgetall(`ql:sy:unique:${queue}`)).toEqual({ "order-1": migrated.id });
    expect(await backend.enqueue(queue, { name: "charge", uniqueKey: "order-1" })).toMatchObject({
      created: false,
      job: { id: migrated.id, uniqueKey: "order-1" },
    });
    expect(await redis.zrange(`ql:q:${queue}-work`, 0, -1)).toEqual([migrated.id]);
  });

  it("a finished imported job lets its unique key go (as an enqueued one does); a live holder keeps its key", async () => {
    const queue = `lq-${unique()}`;
    const done = importable({ state: "completed", attempts: 1, finishedAt: Date.now(), uniqueKey: "order-2" });
    const failed = importable({ state: "failed", attempts: 3, finishedAt: Date.now(), error: { message: "x" }, uniqueKey: "order-3" });
    const resident = await backend.enqueue(queue, { name: "charge", uniqueKey: "order-4" });
    const rival = importable({ state: "waiting", uniqueKey: "order-4" });
    expect(await backend.import(queue, [done, failed, rival])).toMatchObject({ imported: 3, skipped: [] });
    expect(await redis.hget(`ql:sy:unique:${queue}`, "order-4")).toBe(resident.job.id);
    for (const [key, finished] of [
      ["order-2", done],
      ["order-3", failed],
    ] as const) {
      const next = await backend.enqueue(queue, { name: "charge", uniqueKey: key });
      expect(next.created).toBe(true);
      expect(next.job.id).not.toBe(finished.id);
      expect(await redis.hget(`ql:sy:unique:${queue}`, key)).toBe(next.job.id);
    }
    expect(await backend.enqueue(queue, { name: "charge", uniqueKey: "order-4" })).toMatchObject({
      created: false,
      job: { id: resident.job.id },
    });
  });

  it("import that moves a job from another queue of the same Redis takes its unique key along", async () => {
    const [from, to] = [`lq-${unique()}`, `lq-${unique()}`];
    const { job } = await backend.enqueue(from, { name: "charge", uniqueKey: "order-5" });
    expect(await backend.import(to, [job])).toMatchObject({ imported: 1, skipped: [] });
    expect(await redis.hget(`ql:sy:unique:${from}`, "order-5")).toBeNull();
    expect(await redis.hget(`ql:sy:unique:${to}`, "order-5")).toBe(job.id);
    const again = await backend.enqueue(from, { name: "charge", uniqueKey: "order-5" });
    expect(again.created).toBe(true);
    expect(again.job.id).not.toBe(job.id);
  });

  it("commands run by FCALL of the script made a function library, which a server that lost it gets again", async () => {
    const { name } = qlessLibrary();
    const libraries = async () => ((await redis.call("FUNCTION", "LIST", "LIBRARYNAME", name)) as unknown[]).length;
    await redis.script("FLUSH");
    expect(await callQless(redis, "config.get", Date.now() / 1000, "heartbeat")).toBe(60);
    expect(await libraries()).toBe(1);
    // Not by EVALSHA: the script cache stayed empty.
    expect(await redis.script("EXISTS", qlessScript().sha)).toEqual([0]);
    await redis.call("FUNCTION", "DELETE", name);
    expect(await callQless(redis, "config.get", Date.now() / 1000, "heartbeat")).toBe(60);
    expect(await libraries()).toBe(1);
  });

  it("a connection that may not use FUNCTION runs the script by EVALSHA, loading it again after SCRIPT FLUSH", async () => {
    await redis.call("ACL", "SETUSER", "no-functions", "on", "nopass", "~*", "&*", "+@all", "-function");
    const limited = new RedisClient({ path: server.socket, username: "no-functions", password: "x", maxRetriesPerRequest: 1 });
    try {
      await redis.script("FLUSH");
      expect(await callQless(limited, "config.get", Date.now() / 1000, "heartbeat")).toBe(60);
      expect(await redis.script("EXISTS", qlessScript().sha)).toEqual([1]);
      await expect(callQless(limited, "heartbeat", 1700000000, "nope", "w")).rejects.toThrow(
        new QlessScriptError("heartbeat", "Heartbeat(): Job nope does not exist"),
      );
    } finally {
      limited.disconnect();
      await redis.call("ACL", "DELUSER", "no-functions");
    }
  });

  it("qless errors come back with qless's own message, and map to typed errors", async () => {
    await expect(callQless(redis, "heartbeat", 1700000000, "nope", "w")).rejects.toThrow(
      new QlessScriptError("heartbeat", "Heartbeat(): Job nope does not exist"),
    );
    expect(
      qlessErrorMessage(
        'ERR user_script:12: Put(): Arg "jid" missing script: 0123456789abcdef0123456789abcdef01234567, on @user_script:12.',
      ),
    ).toBe('Put(): Arg "jid" missing');
    expect(
      qlessErrorMessage(
        "ERR user_function:60: Queue(): no queue name provided script: switchyard_qless_0123456789abcdef, on @user_function:60.",
      ),
    ).toBe("Queue(): no queue name provided");
    const queue = `lq-${unique()}`;
    await expect(backend.heartbeat(queue, "nope", { worker: "w" })).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(backend.reserve(queue, { worker: "w", count: 0 })).rejects.toMatchObject({ code: "VALIDATION" });
    await expect(backend.list(queue, { state: "waiting", limit: 0 })).rejects.toMatchObject({ code: "VALIDATION" });
    await expect(backend.enqueue("", { name: "k" })).rejects.toMatchObject({ code: "VALIDATION" });
    expect(() => createQlessBackend({})).toThrow(/url or redis/);
  });

  it("an id used by a job of another queue is a ConflictError (qless jids are global)", async () => {
    const id = `dup-${unique()}`;
    await backend.enqueue(`lq-${unique()}`, { id, name: "k" });
    await expect(backend.enqueue(`lq-${unique()}`, { id, name: "k" })).rejects.toMatchObject({ code: "CONFLICT" });
  });

  it("a server that cannot be reached is a BackendUnavailableError", async () => {
    const unreachable = createQlessBackend({ url: "redis://127.0.0.1:1/0" });
    await expect(unreachable.ready()).rejects.toMatchObject({ code: "BACKEND_UNAVAILABLE" });
    await unreachable.close();
  });
});
