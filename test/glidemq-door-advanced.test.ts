import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { eventually } from "@switchyard/conformance";
import { type Gateway, createGateway } from "@switchyard/gateway";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "./matrix-backends.js";

/**
 * The glide-mq door's routes past the basics: writing job schedulers (and firing them from the
 * gateway's reserves), the dead-letter queue, and glide-mq's global rate limit binding the gateway's
 * own reserves. Each is probed in the store (HGET/XRANGE of glide-mq's keys) on database 1, checked
 * beside a real glide-mq 0.15.4 when GLIDEMQ_PATH points at a build of it (see
 * packages/glidemq-valkey/interop/glidemq-interop.ts), and answered 501 on a SQLite store.
 */

interface Reply {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: bodies are compared field by field.
  json: any;
}

function caller(gateway: () => Gateway) {
  return async (method: string, path: string, body?: unknown): Promise<Reply> => {
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { "content-type": "application/json" };
    }
    const res = await gateway().app.request(path, init);
    const text = await res.text();
    return { status: res.status, json: text === "" ? undefined : JSON.parse(text) };
  };
}

/** The wall-clock weekday, hour and minute of `instant` in `zone`. */
function wallClock(instant: number, zone: string): string {
  return new Intl.DateTimeFormat("en-GB", {
    timeZone: zone,
    weekday: "short",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  }).format(instant);
}

describe("glide-mq door on a glidemq-valkey store: schedulers, dead letters, rate limit", () => {
  const store = openStore("glidemq", 1);
  let gateway: Gateway;
  let redis: Redis;
  const call = caller(() => gateway);
  const newQueue = () => store.track(`ga${randomUUID().slice(0, 8)}`);
  beforeAll(async () => {
    gateway = await createGateway({ config: { backends: { main: store.spec } }, env: {} });
    redis = new Redis(store.spec.url as string);
  });
  afterAll(async () => {
    redis?.disconnect();
    await gateway?.close();
    await store.dispose();
  });

  it("PUT /schedulers/:id stores the entry glide-mq's upsertJobScheduler stores; the same schedule again keeps its next run", async () => {
    const queue = newQueue();
    const before = Date.now();
    const template = { name: "tick", data: { n: 1 }, opts: { attempts: 2 } };
    const put = await call("PUT", `/glidemq/queues/${queue}/schedulers/every-minute`, { schedule: { every: 60_000 }, template });
    expect(put).toEqual({ status: 200, json: { upserted: true } });
    const raw = (await redis.hget(`glide:{${queue}}:schedulers`, "every-minute"))!;
    const { nextRun } = JSON.parse(raw) as { nextRun: number };
    expect(nextRun).toBeGreaterThanOrEqual(before + 60_000);
    expect(nextRun).toBeLessThanOrEqual(Date.now() + 60_000);
    // Byte for byte, in glide-mq's key order (undefined fields left out by JSON.stringify).
    expect(raw).toBe(JSON.stringify({ every: 60_000, iterationCount: 0, template, nextRun }));
    await call("PUT", `/glidemq/queues/${queue}/schedulers/every-minute`, { schedule: { every: 60_000 }, template: { name: "renamed" } });
    expect(JSON.parse((await redis.hget(`glide:{${queue}}:schedulers`, "every-minute"))!)).toMatchObject({
      nextRun,
      template: { name: "renamed" },
    });

    await call("PUT", `/glidemq/queues/${queue}/schedulers/monday`, { schedule: { pattern: "30 9 * * 1", tz: "Europe/Paris" } });
    const monday = JSON.parse((await redis.hget(`glide:{${queue}}:schedulers`, "monday"))!) as { nextRun: number };
    expect(wallClock(monday.nextRun, "Europe/Paris")).toBe("Mon 09:30");
    expect(monday.nextRun - Date.now()).toBeLessThanOrEqual(7 * 86_400_000);
    expect((await call("GET", `/glidemq/queues/${queue}/schedulers/monday`)).json).toEqual({ entry: monday, name: "monday" });
  });

  it("PUT /schedulers/:id refuses a schedule glide-mq refuses with a 400 in glide-mq's words, and stores nothing", async () => {
    const queue = newQueue();
    const path = `/glidemq/queues/${queue}/schedulers/bad`;
    for (const [body, error] of [
      [{}, "Missing required field: schedule"],
      [{ schedule: {} }, "Schedule must have pattern (cron), every (ms interval), or repeatAfterComplete (ms)"],
      [
        { schedule: { every: 1000, pattern: "* * * * *" } },
        "Schedule options pattern, every, and repeatAfterComplete are mutually exclusive",
      ],
      [{ schedule: { every: 1.5 } }, "every must be a positive safe integer"],
      [{ schedule: { pattern: "61 * * * *" } }, 'Cron value out of bounds in "61" (0-59)'],
      [{ schedule: { pattern: "* * *" } }, "Invalid cron pattern: expected 5 fields, got 3"],
      [{ schedule: { every: 1000, tz: "Mars/Olympus" } }, "Invalid timezone: Mars/Olympus"],
      [{ schedule: { every: 1000, startDate: 2000, endDate: 1000 } }, "startDate must be less than or equal to endDate"],
      [{ schedule: { every: 1000, endDate: 1000 } }, "Schedule has no occurrences within the configured bounds"],
      [{ schedule: { every: 1000, startDate: "tomorrow" } }, "startDate must be a valid Date or timestamp"],
      [{ schedule: { every: 1000 }, template: { opts: { delay: 5 } } }, "opts.delay is not allowed"],
    ] as const) {
      expect(await call("PUT", path, body), JSON.stringify(body)).toEqual({ status: 400, json: { error: error } });
    }
    expect(await redis.exists(`glide:{${queue}}:schedulers`)).toBe(0);
  });

  it("a reserve through the gateway fires a due scheduler as glide-mq's worker tick does: the template's job, the entry moved on", async () => {
    const queue = newQueue();
    const key = `glide:{${queue}}:schedulers`;
    await call("PUT", `/glidemq/queues/${queue}/schedulers/beat`, {
      schedule: { every: 300 },
      template: { name: "beat", data: { k: 1 }, opts: { priority: 0, attempts: 3 } },
    });
    const { nextRun: first } = JSON.parse((await redis.hget(key, "beat"))!) as { nextRun: number };
    const reserved = await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", wait: 5_000 });
    const [job] = reserved.json.jobs;
    expect(job).toMatchObject({ name: "beat", data: { k: 1 }, opts: { priority: 0, attempts: 3 }, state: "active" });
    expect(await redis.hmget(`glide:{${queue}}:job:${job.id}`, "name", "data", "opts", "maxAttempts")).toEqual([
      "beat",
      '{"k":1}',
      '{"priority":0,"attempts":3}',
      "3",
    ]);
    const entry = JSON.parse((await redis.hget(key, "beat"))!) as { nextRun: number; lastRun: number; iterationCount: number };
    expect(entry).toMatchObject({ every: 300, iterationCount: 1, lastRun: expect.any(Number) });
    expect(entry.nextRun).toBeGreaterThan(entry.lastRun);
    expect((entry.nextRun - first) % 300).toBe(0);
  });

  it("a repeat-after-complete scheduler waits (nextRun 0) while its job runs and fires again that long after it completes", async () => {
    const queue = newQueue();
    const key = `glide:{${queue}}:schedulers`;
    await call("PUT", `/glidemq/queues/${queue}/schedulers/chain`, { schedule: { repeatAfterComplete: 60_000 } });
    const [job] = (await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", wait: 5_000 })).json.jobs;
    expect(job).toMatchObject({ name: "chain", data: {} });
    expect(await redis.hget(`glide:{${queue}}:job:${job.id}`, "schedulerName")).toBe("chain");
    expect(JSON.parse((await redis.hget(key, "chain"))!)).toMatchObject({ nextRun: 0, iterationCount: 1 });
    const completedAt = Date.now();
    await call("POST", `/glidemq/queues/${queue}/jobs/${job.id}/complete`, { worker: "w" });
    const { nextRun } = JSON.parse((await redis.hget(key, "chain"))!) as { nextRun: number };
    expect(nextRun).toBeGreaterThanOrEqual(completedAt + 60_000);
    expect(nextRun).toBeLessThanOrEqual(Date.now() + 60_000);
  });

  it("a job failed for good through the worker routes moves to the queue's dead-letter queue, in glide-mq's envelope", async () => {
    const queue = newQueue();
    const dlq = newQueue();
    // What a glide-mq worker given `deadLetterQueue: {name}` records in the queue's meta.
    await redis.hset(`glide:{${queue}}:meta`, "deadLetterQueueName", dlq);
    const added = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "charge", data: { amount: 5 }, opts: { attempts: 1 } }))
      .json;
    await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w" });
    expect(
      (await call("POST", `/glidemq/queues/${queue}/jobs/${added.id}/fail`, { worker: "w", failedReason: "declined" })).json,
    ).toMatchObject({
      state: "failed",
    });
    const entries = (await redis.xrange(`glide:{${dlq}}:stream`, "-", "+")) as Array<[string, string[]]>;
    expect(entries).toHaveLength(1);
    const dlqId = entries[0]![1][1]!;
    expect(await redis.hget(`glide:{${dlq}}:job:${dlqId}`, "data")).toBe(
      JSON.stringify({ originalQueue: queue, originalJobId: added.id, data: { amount: 5 }, failedReason: "declined", attemptsMade: 1 }),
    );
    const letter = {
      attemptsMade: 1,
      data: { amount: 5 },
      failedReason: "declined",
      id: dlqId,
      name: "charge",
      originalJobId: added.id,
      originalQueue: queue,
    };
    expect((await call("GET", `/glidemq/queues/${queue}/dlq`)).json).toEqual({
      count: 1,
      jobs: [{ ...letter, timestamp: expect.any(Number) }],
    });
    expect((await call("GET", `/glidemq/queues/${queue}/dlq/${dlqId}`)).json).toMatchObject(letter);
    // The dead letter is this queue's, not the dead-letter queue's own.
    expect((await call("GET", `/glidemq/queues/${dlq}/dlq`)).json).toEqual({ count: 0, jobs: [] });
  });

  it("replay adds the dead letter again to its queue with the original data and options, then removes it; remove and replay-all", async () => {
    const queue = newQueue();
    const dlq = newQueue();
    await redis.hset(`glide:{${queue}}:meta`, "deadLetterQueueName", dlq);
    const failOne = async (data: unknown) => {
      const { id } = (
        await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "charge", data, opts: { attempts: 1, jobId: `c-${data}` } })
      ).json;
      await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w" });
      await call("POST", `/glidemq/queues/${queue}/jobs/${id}/fail`, { worker: "w", failedReason: "nope" });
      const letters = (await call("GET", `/glidemq/queues/${queue}/dlq`)).json.jobs as Array<{ id: string; originalJobId: string }>;
      return letters.find((letter) => letter.originalJobId === id)!.id;
    };
    const first = await failOne(1);
    const replayed = await call("POST", `/glidemq/queues/${queue}/dlq/${first}/replay`);
    expect(replayed).toEqual({ status: 200, json: { name: "charge", newJobId: expect.any(String) } });
    // The original jobId is dropped (the failed job still holds it); attempts are kept.
    expect(await redis.hmget(`glide:{${queue}}:job:${replayed.json.newJobId}`, "name", "data", "opts", "state")).toEqual([
      "charge",
      "1",
      '{"attempts":1}',
      "waiting",
    ]);
    expect(await redis.exists(`glide:{${dlq}}:job:${first}`)).toBe(0);
    expect(await call("POST", `/glidemq/queues/${queue}/dlq/${first}/replay`)).toEqual({
      status: 404,
      json: { error: "DLQ job not found" },
    });
    const [again] = (await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w" })).json.jobs;
    expect(again).toMatchObject({ id: replayed.json.newJobId, data: 1 });
    await call("POST", `/glidemq/queues/${queue}/jobs/${again.id}/complete`, { worker: "w" });

    const second = await failOne(2);
    expect((await call("DELETE", `/glidemq/queues/${queue}/dlq/${second}`)).json).toEqual({ removed: true });
    expect(await redis.exists(`glide:{${dlq}}:job:${second}`)).toBe(0);
    expect(await call("DELETE", `/glidemq/queues/${queue}/dlq/${second}`)).toEqual({ status: 404, json: { error: "DLQ job not found" } });

    const [third, fourth] = [await failOne(3), await failOne(4)];
    expect(await call("POST", `/glidemq/queues/${queue}/dlq/replay-all`, { count: 0 })).toEqual({
      status: 400,
      json: { error: "count must be >= 1" },
    });
    const one = (await call("POST", `/glidemq/queues/${queue}/dlq/replay-all`, { count: 1 })).json;
    expect(one).toEqual({ jobs: [{ id: expect.any(String), name: "charge", sourceId: third }], replayed: 1 });
    const rest = (await call("POST", `/glidemq/queues/${queue}/dlq/replay-all`)).json;
    expect(rest).toEqual({ jobs: [{ id: expect.any(String), name: "charge", sourceId: fourth }], replayed: 1 });
    expect((await call("GET", `/glidemq/queues/${queue}/dlq`)).json).toEqual({ count: 0, jobs: [] });
  });

  it("a queue without a dead-letter queue has no dead letters: an empty list, 404 for one", async () => {
    const queue = newQueue();
    expect((await call("GET", `/glidemq/queues/${queue}/dlq?start=0&end=10`)).json).toEqual({ count: 0, jobs: [] });
    expect(await call("GET", `/glidemq/queues/${queue}/dlq/1`)).toEqual({ status: 404, json: { error: "DLQ job not found" } });
    expect(await call("GET", `/glidemq/queues/${queue}/dlq?start=x`)).toEqual({ status: 400, json: { error: "start must be an integer" } });
  });

  it("glide-mq's global rate limit binds the gateway's reserves: at most max jobs per window, counted in glide-mq's rate key", async () => {
    const queue = newQueue();
    await call("POST", `/glidemq/queues/${queue}/jobs/bulk`, { jobs: [1, 2, 3, 4, 5].map((n) => ({ name: `j${n}` })) });
    await call("PUT", `/glidemq/queues/${queue}/rate-limit`, { max: 2, duration: 60_000 });
    const first = (await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", count: 5 })).json.jobs;
    expect(first).toHaveLength(2);
    expect(await redis.hget(`glide:{${queue}}:rate`, "count")).toBe("2");
    expect((await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", count: 5 })).json.jobs).toEqual([]);
    expect((await call("POST", `/v1/queues/${queue}/reserve`, { worker: "v1" })).json.jobs).toEqual([]);
    await call("DELETE", `/glidemq/queues/${queue}/rate-limit`);
    expect((await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", count: 5 })).json.jobs).toHaveLength(3);
  });

  it("a fractional max lets jobs through while fewer than max were taken in the window, as glide-mq's check does", async () => {
    // Found by schemathesis: a max of 0.5 made the claim ask XREADGROUP for half a job, a 500.
    const queue = newQueue();
    await call("POST", `/glidemq/queues/${queue}/jobs/bulk`, { jobs: [1, 2, 3, 4].map((n) => ({ name: `j${n}` })) });
    await call("PUT", `/glidemq/queues/${queue}/rate-limit`, { max: 0.5, duration: 60_000 });
    const first = await call("POST", `/v1/queues/${queue}/reserve`, { worker: "v1", count: 4 });
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    expect(first.json.jobs).toHaveLength(1);
    expect((await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", count: 4 })).json.jobs).toEqual([]);
    await call("PUT", `/glidemq/queues/${queue}/rate-limit`, { max: 2.5, duration: 60_000 });
    expect((await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", count: 4 })).json.jobs).toHaveLength(2);
    expect(await redis.hget(`glide:{${queue}}:rate`, "count")).toBe("3");
  });

  it("a rate-limit window that has passed opens a new one", async () => {
    const queue = newQueue();
    await call("POST", `/glidemq/queues/${queue}/jobs/bulk`, { jobs: [{ name: "a" }, { name: "b" }] });
    await call("PUT", `/glidemq/queues/${queue}/rate-limit`, { max: 1, duration: 200 });
    expect((await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", count: 2 })).json.jobs).toHaveLength(1);
    const next = await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", count: 2, wait: 3_000 });
    expect(next.json.jobs).toHaveLength(1);
    expect(await redis.hget(`glide:{${queue}}:rate`, "count")).toBe("1");
  });
});

describe("glide-mq door over SQLite: schedulers and dead letters answer 501 naming the backend", () => {
  const store = openStore("sqlite");
  let gateway: Gateway;
  const call = caller(() => gateway);
  beforeAll(async () => {
    gateway = await createGateway({ config: { backends: { main: store.spec } }, env: {} });
  });
  afterAll(async () => {
    await gateway?.close();
    await store.dispose();
  });

  it("every route of this suite answers 501 {error} naming the backend and what it lacks", async () => {
    const queue = store.track(`gs${randomUUID().slice(0, 8)}`);
    const kind = gateway.backends.get("main")!.backend.kind;
    for (const [method, path, body, what] of [
      ["PUT", `/glidemq/queues/${queue}/schedulers/s`, { schedule: { every: 1000 } }, "job scheduler"],
      ["GET", `/glidemq/queues/${queue}/dlq`, undefined, "dead-letter queue"],
      ["GET", `/glidemq/queues/${queue}/dlq/1`, undefined, "dead-letter queue"],
      ["DELETE", `/glidemq/queues/${queue}/dlq/1`, undefined, "dead-letter queue"],
      ["POST", `/glidemq/queues/${queue}/dlq/1/replay`, undefined, "dead-letter queue"],
      ["POST", `/glidemq/queues/${queue}/dlq/replay-all`, {}, "dead-letter queue"],
    ] as const) {
      const reply = await call(method, path, body);
      expect(reply.status, path).toBe(501);
      expect(reply.json.error, path).toContain(kind);
      expect(reply.json.error, path).toContain(what);
    }
  });
});

/* Beside a real glide-mq: its Queue and Worker (built from source, GLIDEMQ_PATH) on a private Redis, so the `glidemq` function library it loads stays off the shared server. */
const glidePath = process.env.GLIDEMQ_PATH;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

describe.skipIf(!glidePath)("glide-mq door beside a real glide-mq 0.15.4 (skipped unless GLIDEMQ_PATH names a build of glide-mq)", () => {
  // biome-ignore lint/suspicious/noExplicitAny: glide-mq is loaded at run time from a path, untyped.
  const glide = glidePath ? (createRequire(import.meta.url)(glidePath) as any) : undefined;
  let server: ChildProcess;
  let port: number;
  let gateway: Gateway;
  let redis: Redis;
  const closers: Array<() => Promise<unknown>> = [];
  const call = caller(() => gateway);
  const connection = () => ({ addresses: [{ host: "127.0.0.1", port }] });
  const newQueue = () => `gi${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    port = await freePort();
    server = spawn("redis-server", ["--port", String(port), "--save", "", "--appendonly", "no"], { stdio: "ignore" });
    redis = new Redis({ port, lazyConnect: true, retryStrategy: (times) => (times > 100 ? null : 50) });
    await eventually(
      async () =>
        redis.connect().then(
          () => true,
          () => false,
        ),
      "the private Redis to listen",
      10_000,
    );
    gateway = await createGateway({
      config: { backends: { main: { type: "glidemq-valkey", url: `redis://127.0.0.1:${port}` } } },
      env: {},
    });
  }, 30_000);
  afterAll(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
    await gateway?.close();
    redis?.disconnect();
    server?.kill("SIGKILL");
  });

  it("a scheduler written through the door is fired by glide-mq's Worker, which processes its job; glide-mq's Queue reads it back", async () => {
    const queue = newQueue();
    await call("PUT", `/glidemq/queues/${queue}/schedulers/beat`, { schedule: { every: 200 }, template: { name: "beat", data: { k: 1 } } });
    const seen: Array<{ name: string; data: unknown }> = [];
    const worker = new glide.Worker(
      queue,
      async (job: { name: string; data: unknown }) => void seen.push({ name: job.name, data: job.data }),
      {
        connection: connection(),
        promotionInterval: 100,
      },
    );
    closers.push(() => worker.close());
    await eventually(async () => seen.length > 0, "glide-mq's Worker to process the scheduler's job");
    expect(seen[0]).toEqual({ name: "beat", data: { k: 1 } });
    const glideQueue = new glide.Queue(queue, { connection: connection() });
    closers.push(() => glideQueue.close());
    expect(await glideQueue.getJobScheduler("beat")).toMatchObject({ every: 200, template: { name: "beat", data: { k: 1 } } });
  });

  it("a scheduler glide-mq's Queue upserts is read through the door and fired by the gateway's reserve", async () => {
    const queue = newQueue();
    const glideQueue = new glide.Queue(queue, { connection: connection() });
    closers.push(() => glideQueue.close());
    await glideQueue.upsertJobScheduler("from-glide", { every: 200 }, { name: "made-by-glide", data: { v: 2 } });
    expect((await call("GET", `/glidemq/queues/${queue}/schedulers/from-glide`)).json).toMatchObject({
      name: "from-glide",
      entry: { every: 200, iterationCount: 0, template: { name: "made-by-glide", data: { v: 2 } } },
    });
    const [job] = (await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", wait: 5_000 })).json.jobs;
    expect(job).toMatchObject({ name: "made-by-glide", data: { v: 2 } });
  });

  it("a job glide-mq's Worker dead-letters is listed and replayed through the door, and the replay is processed by glide-mq", async () => {
    const queue = newQueue();
    const dlq = newQueue();
    let calls = 0;
    const worker = new glide.Worker(
      queue,
      async (job: { data: unknown }) => {
        calls++;
        if (calls === 1) throw new Error("first try fails");
        return job.data;
      },
      { connection: connection(), deadLetterQueue: { name: dlq }, promotionInterval: 100 },
    );
    closers.push(() => worker.close());
    const added = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "pay", data: { n: 9 } })).json;
    const listed = await eventually(async () => {
      const reply = (await call("GET", `/glidemq/queues/${queue}/dlq`)).json;
      return reply.count === 1 ? reply : undefined;
    }, "the failed job in the dead-letter queue");
    expect(listed.jobs[0]).toMatchObject({
      name: "pay",
      data: { n: 9 },
      failedReason: "first try fails",
      originalJobId: added.id,
      originalQueue: queue,
    });
    const replayed = (await call("POST", `/glidemq/queues/${queue}/dlq/${listed.jobs[0].id}/replay`)).json;
    await eventually(
      async () => (await call("GET", `/glidemq/queues/${queue}/jobs/${replayed.newJobId}`)).json.state === "completed",
      "glide-mq's Worker to complete the replayed job",
    );
    const glideQueue = new glide.Queue(queue, { connection: connection() });
    closers.push(() => glideQueue.close());
    expect(await glideQueue.getDeadLetterJobs()).toEqual([]);
  });

  it("a job the gateway's worker routes fail for good is a dead letter to glide-mq's Queue; the door's rate limit is glide-mq's", async () => {
    const queue = newQueue();
    const dlq = newQueue();
    await redis.hset(`glide:{${queue}}:meta`, "deadLetterQueueName", dlq);
    const added = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "ship", data: { box: 1 } })).json;
    await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w" });
    await call("POST", `/glidemq/queues/${queue}/jobs/${added.id}/fail`, { worker: "w", failedReason: "lost", retry: false });
    const glideQueue = new glide.Queue(queue, { connection: connection() });
    closers.push(() => glideQueue.close());
    const [letter] = await glideQueue.getDeadLetterJobs();
    expect({ name: letter.name, data: letter.data }).toEqual({
      name: "ship",
      data: { originalQueue: queue, originalJobId: added.id, data: { box: 1 }, failedReason: "lost", attemptsMade: 1 },
    });
    await call("PUT", `/glidemq/queues/${queue}/rate-limit`, { max: 3, duration: 1000 });
    expect(await glideQueue.getGlobalRateLimit()).toEqual({ max: 3, duration: 1000 });
  });
});
