import { eventually } from "@switchyard/conformance";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type QlessBackend, createQlessBackend } from "../packages/qless-redis/src/index.js";
import {
  QLESS_PY_VERSION,
  installQlessPy,
  qlessPy,
  qlessPyOne,
  writeSwitchyardScript,
} from "../packages/qless-redis/test/interop/qless-py.js";
import { serviceUrl } from "./support/services.js";

/**
 * Interop with the real Python client, qless-py 0.11.4 from PyPI, on Redis database 3.
 * qless-py ships an old qless-core whose `table.extend` cannot run on Redis >= 6.2.7; the driver
 * applies the one-line fix (as the Ruby gem did in 0.14) and otherwise runs it unchanged, so jobs
 * move between two different implementations of the qless script sharing the same keys.
 */
const url = `${serviceUrl("redis").replace(/\/\d*$/, "")}/3`;
const BUNDLED = "bundled";
let redis: Redis;
let backend: QlessBackend;
let ourScript: string;

beforeAll(async () => {
  installQlessPy();
  ourScript = writeSwitchyardScript();
  redis = new Redis(url);
  await redis.flushdb();
  backend = createQlessBackend({ url });
  await backend.ready();
}, 180_000);

afterAll(async () => {
  await backend?.close();
  redis?.disconnect();
});

/** The job's ql:* footprint with its jid, queue, worker names and clock readings blanked out. */
async function footprint(jid: string, queue: string): Promise<unknown> {
  const blank = (text: string) =>
    text
      .replaceAll(jid, "<jid>")
      .replaceAll(queue, "<queue>")
      .replace(/(py|sy)-worker-\w+/g, "<worker>");
  const job = await redis.hgetall(`ql:j:${jid}`);
  const fields = Object.fromEntries(
    Object.entries(job).map(([field, value]) => {
      if (field === "time" || (field === "expires" && value !== "0" && value !== "")) return [field, "<time>"];
      if (field === "data" || field === "failure") return [field, JSON.parse(value)];
      return [field, blank(value)];
    }),
  );
  const history = (await redis.lrange(`ql:j:${jid}-history`, 0, -1)).map((entry) => {
    const [, what, details] = JSON.parse(entry);
    return [what, details === undefined ? null : JSON.parse(blank(JSON.stringify(details)))];
  });
  const keys = (await redis.keys("ql:*"))
    .filter((key) => key.includes(jid) || key.includes(`:${queue}`) || key.includes(`${queue}-`))
    .map((key) => blank(key).replace(/:\d{10}:/, ":<day>:"))
    .sort();
  let workerJobs = 0;
  for (const key of await redis.keys("ql:w:*:jobs")) if ((await redis.zscore(key, jid)) !== null) workerJobs++;
  return {
    fields,
    history,
    keys,
    completed: (await redis.zscore("ql:completed", jid)) !== null,
    queueKnown: (await redis.zscore("ql:queues", queue)) !== null,
    workerJobs,
  };
}

const unique = () => Math.random().toString(36).slice(2, 10);

describe(`qless interop with qless-py ${QLESS_PY_VERSION} (PyPI) on Redis 7`, () => {
  it("a job put by Switchyard is popped, heartbeated and completed by qless-py with its own qless-core", async () => {
    const queue = `iq-${unique()}`;
    const { job } = await backend.enqueue(queue, { id: `sy-${unique()}`, name: "my.Klass", data: { n: 1 }, priority: 3, tags: ["t1"] });
    const worker = `py-worker-${unique()}`;
    const [popped, beat, completed] = qlessPy(url, BUNDLED, [
      { op: "pop", queue, worker },
      { op: "heartbeat", jid: job.id, worker },
      { op: "complete", jid: job.id, worker },
    ]);
    expect(popped?.ok).toMatchObject({
      jid: job.id,
      klass: "my.Klass",
      data: { n: 1 },
      priority: 3,
      tags: ["t1"],
      state: "running",
      worker,
    });
    expect(typeof beat?.ok).toBe("number");
    expect(completed?.ok).toBe("complete");
    expect(await backend.get(queue, job.id)).toMatchObject({ state: "completed", attempts: 1, data: { n: 1 } });
    expect(await redis.hget(`ql:j:${job.id}`, "state")).toBe("complete");
  });

  it("a job put by qless-py is reserved, heartbeated and completed through Switchyard", async () => {
    const queue = `iq-${unique()}`;
    const jid = qlessPyOne(url, BUNDLED, { op: "put", queue, klass: "my.Klass", data: { n: 2 }, retries: 2 }) as string;
    const [reserved] = await backend.reserve(queue, { worker: "sy-worker-1", leaseMs: 30_000 });
    expect(reserved).toMatchObject({ id: jid, name: "my.Klass", data: { n: 2 }, state: "active", attempts: 1, maxAttempts: 3 });
    await backend.heartbeat(queue, jid, { worker: "sy-worker-1", leaseMs: 60_000 });
    await backend.complete(queue, jid, { worker: "sy-worker-1" });
    expect(qlessPyOne(url, BUNDLED, { op: "get", jid })).toMatchObject({ state: "complete", history: ["put", "popped", "done"] });
  });

  it("put, pop, heartbeat, complete leave the same ql:* state whichever side does each step", async () => {
    const run = async (putBy: "py" | "sy", workBy: "py" | "sy") => {
      const queue = `iq-${unique()}`;
      const id = `eq-${unique()}`;
      if (putBy === "py") qlessPyOne(url, BUNDLED, { op: "put", queue, jid: id, klass: "my.Klass", data: { n: 3 }, retries: 5 });
      else await backend.enqueue(queue, { id, name: "my.Klass", data: { n: 3 }, maxAttempts: 6 });
      const worker = `${workBy}-worker-${unique()}`;
      if (workBy === "py") {
        qlessPy(url, BUNDLED, [
          { op: "pop", queue, worker },
          { op: "heartbeat", jid: id, worker },
          { op: "complete", jid: id, worker },
        ]);
      } else {
        await backend.reserve(queue, { worker });
        await backend.heartbeat(queue, id, { worker });
        await backend.complete(queue, id, { worker });
      }
      return footprint(id, queue);
    };
    const allPython = await run("py", "py");
    expect(allPython).toMatchObject({ completed: true, fields: { state: "complete", queue: "" } });
    expect(await run("sy", "py")).toEqual(allPython);
    expect(await run("py", "sy")).toEqual(allPython);
    expect(await run("sy", "sy")).toEqual(allPython);
  });

  it("a retry by Switchyard is seen by qless-py as one retry spent, and qless-py's fail is a failed job for Switchyard", async () => {
    const queue = `iq-${unique()}`;
    const { job } = await backend.enqueue(queue, { name: "flaky", data: {}, maxAttempts: 4 });
    await backend.reserve(queue, { worker: "sy-worker-2" });
    await backend.fail(queue, job.id, { worker: "sy-worker-2", error: { group: "flaky:Boom", message: "boom" } });
    const worker = `py-worker-${unique()}`;
    const [popped, failed] = qlessPy(url, BUNDLED, [
      { op: "pop", queue, worker },
      { op: "fail", jid: job.id, worker, group: "flaky:Fatal", message: "gave up" },
    ]);
    expect(popped?.ok).toMatchObject({ jid: job.id, retries: 3, remaining: 2, failure: { group: "flaky:Boom", message: "boom" } });
    expect(failed?.ok).toBe(job.id);
    expect(await backend.get(queue, job.id)).toMatchObject({
      state: "failed",
      attempts: 2,
      error: { group: "flaky:Fatal", message: "gave up" },
    });
    expect((await backend.counts(queue)).failed).toBe(1);
  });

  it("cancel through Switchyard tells the qless-py worker holding the job, on ql:w:<worker>, as qless does", async () => {
    const queue = `iq-${unique()}`;
    const worker = `py-worker-${unique()}`;
    const { job } = await backend.enqueue(queue, { name: "long", data: {} });
    qlessPyOne(url, BUNDLED, { op: "pop", queue, worker });
    const subscriber = new Redis(url);
    const messages: unknown[] = [];
    subscriber.on("message", (_channel: string, message: string) => messages.push(JSON.parse(message)));
    await subscriber.subscribe(`ql:w:${worker}`);
    await backend.cancel(queue, job.id);
    await eventually(async () => messages.length > 0, "the canceled message");
    subscriber.disconnect();
    expect(messages).toEqual([{ jid: job.id, event: "canceled", worker, queue }]);
    expect(qlessPy(url, BUNDLED, [{ op: "get", jid: job.id }])[0]).toEqual({ ok: null });
  });

  it("qless-py 0.11.4's put predates qless-core's worker argument, so it is refused by master's protocol (ours)", () => {
    const queue = `iq-${unique()}`;
    const [result] = qlessPy(url, ourScript, [{ op: "put", queue, jid: "old-put", klass: "my.Klass", data: {} }]);
    expect(result?.error).toContain('Put(): Arg "delay" not a number: priority');
  });

  it("every other qless-py command runs unchanged on Switchyard's script loaded in place of its qless.lua", async () => {
    const queue = `iq-${unique()}`;
    const worker = `py-worker-${unique()}`;
    const now = Date.now() / 1000;
    await backend.qless("put", now, "py-client", queue, "ours-1", "my.Klass", '{"a":1}', 0, "priority", 1, "tags", '["x"]');
    await backend.qless("put", now, "py-client", queue, "ours-2", "my.Klass", '{"a":2}', 0, "depends", '["ours-1"]');
    const results = qlessPy(url, ourScript, [
      { op: "counts", queue },
      { op: "track", jid: "ours-1" },
      { op: "pop", queue, worker },
      { op: "heartbeat", jid: "ours-1", worker },
      { op: "complete", jid: "ours-1", worker },
      { op: "get", jid: "ours-2" },
      { op: "pop", queue, worker },
      { op: "fail", jid: "ours-2", worker, group: "g", message: "m" },
      { op: "failed" },
      { op: "unfail", group: "g", queue },
      { op: "tagged", tag: "x" },
      { op: "tracked" },
      { op: "length", queue },
      { op: "workers" },
    ]);
    const ok = results.map((result) => {
      if (result.error !== undefined) throw new Error(result.error);
      return result.ok;
    });
    expect(ok[0]).toMatchObject({ name: queue, waiting: 1, depends: 1, running: 0 });
    expect(ok[2]).toMatchObject({ jid: "ours-1", state: "running", tags: ["x"], dependents: ["ours-2"], data: { a: 1 } });
    expect(typeof ok[3]).toBe("number");
    expect(ok[4]).toBe("complete");
    expect(ok[5]).toMatchObject({ state: "waiting", dependencies: [] });
    expect(ok[6]).toMatchObject({ jid: "ours-2", data: { a: 2 } });
    expect(ok[7]).toBe("ours-2");
    expect(ok[8]).toMatchObject({ g: 1 });
    expect(ok[9]).toBe(1);
    expect(ok[10]).toEqual(["ours-1"]);
    expect(ok[11]).toEqual(["ours-1"]);
    expect(ok[12]).toBe(1);
    expect(ok[13]).toContainEqual({ name: worker, jobs: 0, stalled: 0 });
  });
});
