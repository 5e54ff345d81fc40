import { randomUUID } from "node:crypto";
import { eventually } from "@switchyard/conformance";
import { type Gateway, createGateway } from "@switchyard/gateway";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "./matrix-backends.js";
import { caller, readEvents } from "./support/glide-door.js";

/**
 * The glide-mq door's routes for what glide-mq's workers keep beside a job: a job's output stream,
 * suspensions and signals, reported AI usage and flow budgets, and broadcast. On a glidemq-valkey
 * store (database 1) each answers as glide-mq 0.15.4's proxy answered on the same keys (recorded with
 * the real proxy); the keys are written here as glide-mq's Worker writes them and probed after each
 * write. Budgets and DAGs written by POST /flows: glidemq-door-dag.test.ts; the same routes beside a
 * real glide-mq and its proxy: glidemq-door-extras-real.test.ts (GLIDEMQ_PATH).
 */

/** What glidemq_suspend leaves: state `suspended` with its fields, no stream entry, the id in `suspended` by deadline. */
async function suspendAsGlideMqDoes(redis: Redis, queue: string, id: string, reason: string, timeout: number, now: number) {
  const p = `glide:{${queue}}`;
  for (const [entry, fields] of (await redis.xrange(`${p}:stream`, "-", "+")) as Array<[string, string[]]>) {
    if (fields[fields.indexOf("jobId") + 1] === id) await redis.xdel(`${p}:stream`, entry);
  }
  await redis.hset(
    `${p}:job:${id}`,
    "state",
    "suspended",
    "processedOn",
    now - 1,
    "suspendedAt",
    now,
    "suspendReason",
    reason,
    "suspendTimeout",
    timeout,
  );
  await redis.zadd(`${p}:suspended`, now + timeout, id);
}

describe("glide-mq door on a glidemq-valkey store: job output, suspend and signal, usage and budgets, broadcast", () => {
  const store = openStore("glidemq", 1);
  let gateway: Gateway;
  let redis: Redis;
  const call = caller(() => gateway);
  const newQueue = () => store.track(`gx${randomUUID().slice(0, 8)}`);
  const usageQueues: string[] = [];
  beforeAll(async () => {
    gateway = await createGateway({ config: { backends: { main: store.spec } }, env: {} });
    redis = new Redis(store.spec.url as string);
  });
  afterAll(async () => {
    if (usageQueues.length > 0) await redis.srem("glide:usage:queues", ...usageQueues);
    redis?.disconnect();
    await gateway?.close();
    await store.dispose();
  });

  describe("GET /queues/:q/jobs/:id/stream", () => {
    it("streams the job's output entries as `id:`/`data:` frames and ends once the job completed; lastId and Last-Event-ID resume", async () => {
      const queue = newQueue();
      const { id } = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "chat" })).json;
      await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w" });
      const key = `glide:{${queue}}:jstream:${id}`;
      const first = await redis.xadd(key, "*", "token", "Hel");
      // The stream is open while the job runs; what is written meanwhile arrives, and it ends when the job completes.
      const live = gateway.app.request(`/glidemq/queues/${queue}/jobs/${id}/stream`);
      const second = await redis.xadd(key, "*", "token", "lo", "final", "1");
      await call("POST", `/glidemq/queues/${queue}/jobs/${id}/complete`, { worker: "w", returnvalue: "Hello" });
      const response = await live;
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toContain("text/event-stream");
      const whole = `id: ${first}\ndata: {"token":"Hel"}\n\nid: ${second}\ndata: {"token":"lo","final":"1"}\n\n`;
      expect(await readEvents(response, (text) => text === whole)).toBe(whole);

      // After the job finished: the whole stream, or what follows lastId / Last-Event-ID, then the end.
      expect((await call("GET", `/glidemq/queues/${queue}/jobs/${id}/stream`)).text).toBe(whole);
      const tail = `id: ${second}\ndata: {"token":"lo","final":"1"}\n\n`;
      expect((await call("GET", `/glidemq/queues/${queue}/jobs/${id}/stream?lastId=${first}`)).text).toBe(tail);
      expect((await call("GET", `/glidemq/queues/${queue}/jobs/${id}/stream`, undefined, { "last-event-id": first! })).text).toBe(tail);
    });

    it("a job that does not exist streams nothing and ends at once, as the proxy's does; a bad queue name is a 400", async () => {
      const queue = newQueue();
      const reply = await call("GET", `/glidemq/queues/${queue}/jobs/nope/stream`);
      expect({ status: reply.status, type: reply.type, text: reply.text }).toEqual({ status: 200, type: "text/event-stream", text: "" });
      expect(await call("GET", "/glidemq/queues/a:b/jobs/1/stream")).toMatchObject({
        status: 400,
        json: { error: "Queue name must not contain curly braces or colons" },
      });
    });
  });

  describe("suspend, suspended and signal", () => {
    it("GET /suspend answers the suspension glide-mq recorded; 404 `Job is not suspended` otherwise", async () => {
      const queue = newQueue();
      const { id } = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "approve", data: { doc: 7 } })).json;
      const other = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "plain" })).json.id;
      const now = Date.now();
      await suspendAsGlideMqDoes(redis, queue, id, "need approval", 600_000, now);
      expect(await call("GET", `/glidemq/queues/${queue}/jobs/${id}/suspend`)).toMatchObject({
        status: 200,
        json: { reason: "need approval", suspendedAt: now, timeout: 600_000, signals: [] },
      });
      for (const missing of [other, "nope"]) {
        expect(await call("GET", `/glidemq/queues/${queue}/jobs/${missing}/suspend`)).toMatchObject({
          status: 404,
          json: { error: "Job is not suspended" },
        });
      }
      const listed = (await call("GET", `/glidemq/queues/${queue}/suspended`)).json.jobs;
      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({
        id,
        name: "approve",
        data: { doc: 7 },
        state: "suspended",
        attemptsMade: 0,
        processedOn: now - 1,
        suspend: { reason: "need approval", suspendedAt: now, timeout: 600_000, signals: [] },
      });
      const bare = (await call("GET", `/glidemq/queues/${queue}/suspended?excludeData=true&start=0&end=0`)).json.jobs;
      expect(bare[0]).not.toHaveProperty("data");
      expect((await call("GET", `/glidemq/queues/${queue}/suspended?start=1`)).json).toEqual({ jobs: [] });
      expect(await call("GET", `/glidemq/queues/${queue}/suspended?start=-3`)).toMatchObject({
        status: 400,
        json: { error: "start must be >= 0" },
      });
    });

    it("POST /signal resumes the job as glidemq_signal does: the signal kept, the job waiting on the stream, a `resumed` event", async () => {
      const queue = newQueue();
      const p = `glide:{${queue}}`;
      const { id } = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "approve", data: { doc: 7 } })).json;
      await suspendAsGlideMqDoes(redis, queue, id, "need approval", 600_000, Date.now());
      const [lastEvent] = (await redis.xrevrange(`${p}:events`, "+", "-", "COUNT", 1)) as Array<[string, string[]]>;

      const before = Date.now();
      expect(await call("POST", `/glidemq/queues/${queue}/jobs/${id}/signal`, { name: "approve", data: { by: "ann" } })).toMatchObject({
        status: 200,
        json: { resumed: true },
      });
      const [stored] = await redis.lrange(`${p}:signals:${id}`, 0, -1);
      const signal = JSON.parse(stored!) as { name: string; data: string; receivedAt: number };
      expect(signal).toEqual({ name: "approve", data: JSON.stringify({ by: "ann" }), receivedAt: signal.receivedAt });
      expect(signal.receivedAt).toBeGreaterThanOrEqual(before);
      const hash = await redis.hgetall(`${p}:job:${id}`);
      expect(hash.state).toBe("waiting");
      expect(JSON.parse(hash.signals!)).toEqual([signal]);
      expect(await redis.zcard(`${p}:suspended`)).toBe(0);
      const [entry] = (await redis.xrevrange(`${p}:stream`, "+", "-", "COUNT", 1)) as Array<[string, string[]]>;
      expect(entry![1]).toEqual(["jobId", id, "name", "approve"]);
      const events = (await redis.xrange(`${p}:events`, `(${lastEvent![0]}`, "+")) as Array<[string, string[]]>;
      expect(events.map(([, fields]) => fields)).toEqual([["event", "resumed", "jobId", id, "signal", "approve"]]);

      // No longer suspended: a second signal resumes nothing; a worker can take the job again.
      expect((await call("POST", `/glidemq/queues/${queue}/jobs/${id}/signal`, { name: "again" })).json).toEqual({ resumed: false });
      expect(await redis.llen(`${p}:signals:${id}`)).toBe(1);
      expect(await call("GET", `/glidemq/queues/${queue}/jobs/${id}/suspend`)).toMatchObject({ status: 404 });
      const reserved = (await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w" })).json.jobs;
      expect(reserved.map((job: { id: string }) => job.id)).toEqual([id]);
    });

    it("a signal without data stores '' as its data, as glide-mq stores it; the suspension then lists it", async () => {
      const queue = newQueue();
      const { id } = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "s" })).json;
      await suspendAsGlideMqDoes(redis, queue, id, "r", 1000, Date.now());
      await call("POST", `/glidemq/queues/${queue}/jobs/${id}/signal`, { name: "go" });
      expect(JSON.parse((await redis.lindex(`glide:{${queue}}:signals:${id}`, 0))!)).toMatchObject({ name: "go", data: "" });
    });

    it("bad signals are 400s in glide-mq's words and write nothing; a job that is not suspended answers resumed false", async () => {
      const queue = newQueue();
      const p = `glide:{${queue}}`;
      const { id } = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "s" })).json;
      await suspendAsGlideMqDoes(redis, queue, id, "r", 1000, Date.now());
      const path = `/glidemq/queues/${queue}/jobs/${id}/signal`;
      for (const [body, error] of [
        [{ data: 1 }, "Missing required field: name (string)"],
        [{ name: 5 }, "Missing required field: name (string)"],
        [{ name: "" }, "Missing required field: name (string)"],
        ["{bad", "Bad request"],
      ] as const) {
        expect(await call("POST", path, body), JSON.stringify(body)).toMatchObject({ status: 400, json: { error } });
      }
      expect(await call("POST", path, { name: "x", data: "y".repeat(1_100_000) })).toMatchObject({ status: 413 });
      expect(await redis.exists(`${p}:signals:${id}`)).toBe(0);
      expect(await redis.hget(`${p}:job:${id}`, "state")).toBe("suspended");
      const waiting = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "w" })).json.id;
      for (const target of [waiting, "nope"]) {
        expect((await call("POST", `/glidemq/queues/${queue}/jobs/${target}/signal`, { name: "go" })).json).toEqual({ resumed: false });
        expect(await redis.exists(`${p}:signals:${target}`)).toBe(0);
      }
      expect(await redis.hget(`${p}:job:${waiting}`, "state")).toBe("waiting");
    });
  });

  describe("flow usage and budgets", () => {
    it("GET /flows/:parentId/usage sums the usage the parent and its children reported; 404 for no such job", async () => {
      const queue = newQueue();
      const p = `glide:{${queue}}`;
      const added = await call("POST", "/glidemq/flows", {
        flow: {
          name: "parent",
          queueName: queue,
          children: [
            { name: "child", queueName: queue },
            { name: "child", queueName: queue },
          ],
        },
      });
      const flowId = added.json.flowId as string;
      const children = (await redis.smembers(`${p}:deps:${flowId}`)).map((member) => member.slice(member.lastIndexOf(":") + 1));
      expect(children).toHaveLength(2);
      // As job.reportUsage() writes them.
      await redis.hset(
        `${p}:job:${flowId}`,
        "usage:model",
        "m2",
        "usage:tokens",
        '{"input":3}',
        "usage:totalTokens",
        "3",
        "usage:totalCost",
        "0.25",
      );
      await redis.hset(`${p}:job:${children[0]}`, "usage:model", "m2", "usage:tokens", '{"input":3}', "usage:totalCost", "0.25");
      await redis.hset(
        `${p}:job:${children[1]}`,
        "usage:model",
        "m1",
        "usage:tokens",
        '{"input":10,"output":5}',
        "usage:costs",
        '{"input":0.5}',
        "usage:totalTokens",
        "15",
        "usage:totalCost",
        "0.5",
        "usage:costUnit",
        "usd",
      );
      expect(await call("GET", `/glidemq/queues/${queue}/flows/${flowId}/usage`)).toMatchObject({
        status: 200,
        json: {
          tokens: { input: 16, output: 5 },
          totalTokens: 18,
          costs: { input: 0.5 },
          totalCost: 1,
          costUnit: "usd",
          jobCount: 3,
          models: { m2: 2, m1: 1 },
        },
      });
      // A job without children or usage: zero sums, no costUnit.
      const lone = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "lone" })).json.id;
      expect((await call("GET", `/glidemq/queues/${queue}/flows/${lone}/usage`)).json).toEqual({
        tokens: {},
        totalTokens: 0,
        costs: {},
        totalCost: 0,
        jobCount: 0,
        models: {},
      });
      expect(await call("GET", `/glidemq/queues/${queue}/flows/nope/usage`)).toMatchObject({
        status: 404,
        json: { error: "Job not found" },
      });
    });

    it("GET /flows/:flowId/budget reads the budget FlowProducer stored; 404 `Flow budget not found` without one", async () => {
      const queue = newQueue();
      await redis.hset(
        `glide:{${queue}}:budget:9`,
        ...["usedTokens", "18", "usedCost", "0.75", "exceeded", "0", "onExceeded", "fail", "maxTotalTokens", "100"],
        ...["tokenWeights", '{"input":2}', "costUnit", "usd", "usedTokens:input", "9"],
      );
      expect(await call("GET", `/glidemq/queues/${queue}/flows/9/budget`)).toMatchObject({
        status: 200,
        json: {
          maxTotalTokens: 100,
          tokenWeights: { input: 2 },
          costUnit: "usd",
          usedTokens: 18,
          usedCost: 0.75,
          exceeded: false,
          onExceeded: "fail",
        },
      });
      await redis.hset(`glide:{${queue}}:budget:10`, "exceeded", "1", "onExceeded", "pause", "maxTotalCost", "2");
      expect((await call("GET", `/glidemq/queues/${queue}/flows/10/budget`)).json).toEqual({
        maxTotalCost: 2,
        usedTokens: 0,
        usedCost: 0,
        exceeded: true,
        onExceeded: "pause",
      });
      expect(await call("GET", `/glidemq/queues/${queue}/flows/11/budget`)).toMatchObject({
        status: 404,
        json: { error: "Flow budget not found" },
      });
    });
  });

  describe("GET /usage/summary", () => {
    /** A usage bucket as job.reportUsage() rolls it up, and the queue in the global set. */
    const reportUsage = async (queue: string, bucket: number, fields: Record<string, string>) => {
      await redis.hset(`glide:{${queue}}:usage:${bucket}`, fields);
      await redis.sadd("glide:usage:queues", queue);
      usageQueues.push(queue);
    };

    it("sums the buckets of the window, in total and per queue; a queue without usage is left out", async () => {
      const [a, b, quiet] = [newQueue(), newQueue(), newQueue()];
      const minute = Math.floor(Date.now() / 60_000) * 60_000;
      await reportUsage(a, minute, {
        jobCount: "3",
        totalTokens: "24",
        totalCost: "1.25",
        costUnit: "usd",
        "models:m2": "3",
        "tokens:input": "19",
      });
      await reportUsage(a, minute - 120_000, { jobCount: "1", "tokens:output": "5", "costs:input": "0.5", totalCost: "0.5" });
      await reportUsage(b, minute, { jobCount: "2", "models:m1": "2", totalTokens: "4" });
      // Two hours ago: outside the default hour.
      await reportUsage(b, minute - 7_200_000, { jobCount: "5", totalTokens: "500" });
      const before = Date.now();
      const reply = await call("GET", `/glidemq/usage/summary?queues=${a},${b},${quiet}`);
      expect(reply.status).toBe(200);
      const { startTime, endTime, ...summary } = reply.json;
      expect(endTime).toBeGreaterThanOrEqual(before);
      expect(endTime - startTime).toBe(3_600_000);
      expect(summary).toEqual({
        bucketSizeMs: 60_000,
        queues: [a, b].sort(),
        jobCount: 6,
        tokens: { input: 19, output: 5 },
        totalTokens: 28,
        costs: { input: 0.5 },
        totalCost: 1.75,
        costUnit: "usd",
        models: { m2: 3, m1: 2 },
        perQueue: {
          [a]: {
            jobCount: 4,
            tokens: { input: 19, output: 5 },
            totalTokens: 24,
            costs: { input: 0.5 },
            totalCost: 1.75,
            costUnit: "usd",
            models: { m2: 3 },
          },
          [b]: { jobCount: 2, tokens: {}, totalTokens: 4, costs: {}, totalCost: 0, models: { m1: 2 } },
        },
      });
      const wide = (await call("GET", `/glidemq/usage/summary?queues=${b}&windowMs=10800000`)).json;
      expect(wide.perQueue[b]).toMatchObject({ jobCount: 7, totalTokens: 504 });
      const bounded = (await call("GET", `/glidemq/usage/summary?queues=${b}&start=${minute - 7_200_000}&end=${minute - 7_100_000}`)).json;
      expect(bounded).toMatchObject({ startTime: minute - 7_200_000, endTime: minute - 7_100_000, jobCount: 5 });
      // Without `queues`: every queue in glide-mq's global set.
      const all = (await call("GET", "/glidemq/usage/summary")).json;
      expect(all.perQueue[a]).toEqual(summary.perQueue[a]);
      expect(all.queues).toEqual(expect.arrayContaining([a, b]));
    });

    it("refuses a bad window or queue with glide-mq's 400s", async () => {
      const future = Date.now() + 100_000;
      for (const [query, error] of [
        ["window=5&windowMs=6", "window and windowMs must match when both are provided"],
        ["start=abc", "start must be an integer"],
        ["windowMs=0", "windowMs must be >= 1"],
        ["queues=a:b", "Queue name must not contain curly braces or colons"],
        [`start=${future}`, "startTime must be less than or equal to endTime"],
        ["queues=a,b,c&start=0", "usage summary request exceeds maximum bucket reads (129603 > 100000); reduce queues or windowMs"],
      ] as const) {
        expect(await call("GET", `/glidemq/usage/summary?${query}`), query).toMatchObject({ status: 400, json: { error } });
      }
    });
  });

  describe("broadcast", () => {
    it("POST /broadcast/:name publishes a job of the queue named for the broadcast: 201 {id, subject}; 200 {skipped} for an existing jobId", async () => {
      const name = newQueue();
      const p = `glide:{${name}}`;
      const published = await call("POST", `/glidemq/broadcast/${name}`, { subject: "orders.new", data: { o: 1 } });
      expect(published).toMatchObject({ status: 201, json: { id: expect.any(String), subject: "orders.new" } });
      const hash = await redis.hgetall(`${p}:job:${published.json.id}`);
      expect(hash).toMatchObject({ name: "orders.new", data: '{"o":1}', state: "waiting" });
      expect(await call("POST", `/glidemq/broadcast/${name}`, { subject: "x", opts: { jobId: published.json.id } })).toMatchObject({
        status: 200,
        json: { skipped: true },
      });
      expect(await call("POST", `/glidemq/broadcast/${name}`, { subject: "orders.x", opts: { jobId: "c1" } })).toMatchObject({
        status: 201,
        json: { id: "c1", subject: "orders.x" },
      });
    });

    it("bad publishes are 400s in glide-mq's words and store nothing", async () => {
      const name = newQueue();
      for (const [path, body, error] of [
        [`/glidemq/broadcast/${name}`, { data: 1 }, "Missing required field: subject"],
        [`/glidemq/broadcast/${name}`, { subject: "" }, "Missing required field: subject"],
        [`/glidemq/broadcast/${name}`, { subject: "a.b", opts: { lockDuration: 5 } }, "opts.lockDuration is not allowed"],
        [`/glidemq/broadcast/${name}`, "{bad", "Bad request"],
        ["/glidemq/broadcast/a:b", { subject: "a.b" }, "Queue name must not contain curly braces or colons"],
      ] as const) {
        expect(await call("POST", path, body), JSON.stringify(body)).toMatchObject({ status: 400, json: { error } });
      }
      expect(await redis.keys(`glide:{${name}}:*`)).toEqual([]);
      expect(await call("GET", `/glidemq/broadcast/${name}/events`)).toMatchObject({
        status: 400,
        json: { error: "Missing required query param: subscription" },
      });
      expect(await call("GET", `/glidemq/broadcast/${name}/events?subscription=s&subjects=a.>.b`)).toMatchObject({
        status: 400,
        json: { error: "`>` wildcard must be the last token in a subject pattern" },
      });
      expect(await redis.keys(`glide:{${name}}:*`)).toEqual([]);
    });

    it("GET /broadcast/:name/events delivers what is published after the subscription joined, matching `subjects`, as a BroadcastWorker completes it", async () => {
      const name = newQueue();
      const p = `glide:{${name}}`;
      const before = (await call("POST", `/glidemq/broadcast/${name}`, { subject: "orders.old" })).json.id;
      const response = await gateway.app.request(`/glidemq/broadcast/${name}/events?subscription=s1&subjects=orders.*`);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toContain("text/event-stream");
      // The subscription is a consumer group made at the stream's end.
      const [group] = (await redis.xinfo("GROUPS", `${p}:stream`)) as unknown[][];
      expect(group!.slice(0, 2)).toEqual(["name", "s1"]);

      const first = (await call("POST", `/glidemq/broadcast/${name}`, { subject: "orders.new", data: { o: 1 } })).json.id;
      const skipped = (await call("POST", `/glidemq/broadcast/${name}`, { subject: "users.new", data: { u: 1 } })).json.id;
      const custom = (await call("POST", `/glidemq/broadcast/${name}`, { subject: "orders.x", opts: { jobId: "c1" } })).json.id;
      const text = await readEvents(response, (seen) => seen.includes("id: c1"));
      const frames = text.split("\n\n").filter(Boolean);
      expect(frames[0]).toBe(": connected");
      const timestamp = async (id: string) => Number(await redis.hget(`${p}:job:${id}`, "timestamp"));
      expect(frames.slice(1)).toEqual([
        `id: ${first}\nevent: message\ndata: ${JSON.stringify({ data: { o: 1 }, id: first, subject: "orders.new", timestamp: await timestamp(first) })}`,
        `id: ${custom}\nevent: message\ndata: ${JSON.stringify({ data: null, id: custom, subject: "orders.x", timestamp: await timestamp(custom) })}`,
      ]);

      // Every message the subscription read is completed (returnvalue null), the one outside `subjects` too; the entries stay.
      await eventually(async () => (await redis.hget(`${p}:job:${skipped}`, "state")) === "completed", "the unmatched message completed");
      for (const id of [first, skipped, custom]) {
        const hash = await redis.hgetall(`${p}:job:${id}`);
        expect(hash, id).toMatchObject({ state: "completed", returnvalue: "null" });
        expect(Number(hash.finishedOn)).toBeGreaterThanOrEqual(Number(hash.processedOn));
      }
      expect(await redis.zrange(`${p}:completed`, 0, -1)).toEqual(expect.arrayContaining([first, skipped, custom]));
      expect(await redis.hget(`${p}:job:${before}`, "state")).toBe("waiting");
      expect(await redis.xlen(`${p}:stream`)).toBe(4);
      const [after] = (await redis.xinfo("GROUPS", `${p}:stream`)) as unknown[][];
      expect(after![after!.indexOf("pending") + 1]).toBe(0);
      const events = ((await redis.xrange(`${p}:events`, "-", "+")) as Array<[string, string[]]>).map(([, fields]) => fields);
      expect(events.filter((fields) => fields[1] === "completed")).toEqual(
        [first, skipped, custom].map((id) => ["event", "completed", "jobId", id, "returnvalue", "null"]),
      );
      const metrics = await redis.hgetall(`${p}:metrics:completed`);
      expect(
        Object.entries(metrics)
          .filter(([field]) => field.endsWith(":c"))
          .reduce((sum, [, n]) => sum + Number(n), 0),
      ).toBe(3);

      // A second subscription joining now reads only what comes next; the first one's messages stay with it.
      const late = await gateway.app.request(`/glidemq/broadcast/${name}/events?subscription=s2`);
      const next = (await call("POST", `/glidemq/broadcast/${name}`, { subject: "users.late" })).json.id;
      const lateText = await readEvents(late, (seen) => seen.includes(`id: ${next}\n`));
      expect(lateText.split("\n\n").filter(Boolean)).toHaveLength(2);
      expect(((await redis.xinfo("GROUPS", `${p}:stream`)) as unknown[][]).map((g) => g[1])).toEqual(["s1", "s2"]);
    });
  });
});

describe("glide-mq door over SQLite: glide-mq's own extras answer 501 naming the backend", () => {
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

  it("each route answers 501 {error} naming the backend and what it lacks", async () => {
    const queue = store.track(`gs${randomUUID().slice(0, 8)}`);
    const { id } = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "a" })).json;
    const kind = gateway.backends.get("main")!.backend.kind;
    for (const [method, path, body, what] of [
      ["GET", `/glidemq/queues/${queue}/jobs/${id}/stream`, undefined, "output stream"],
      ["GET", `/glidemq/queues/${queue}/jobs/${id}/suspend`, undefined, "suspending"],
      ["POST", `/glidemq/queues/${queue}/jobs/${id}/signal`, { name: "go" }, "signalling"],
      ["GET", `/glidemq/queues/${queue}/suspended`, undefined, "suspended jobs"],
      ["GET", `/glidemq/queues/${queue}/flows/${id}/usage`, undefined, "usage"],
      ["GET", `/glidemq/queues/${queue}/flows/${id}/budget`, undefined, "budget"],
      ["GET", `/glidemq/usage/summary?queues=${queue}`, undefined, "usage summary"],
      ["GET", "/glidemq/usage/summary", undefined, "usage summary"],
      ["POST", `/glidemq/broadcast/${queue}`, { subject: "a" }, "broadcast"],
      ["GET", `/glidemq/broadcast/${queue}/events?subscription=s`, undefined, "broadcast"],
    ] as const) {
      const reply = await call(method, path, body);
      expect(reply.status, path).toBe(501);
      expect(reply.json.error, path).toContain(kind);
      expect(reply.json.error, path).toContain(what);
    }
    // Nothing was published or signalled: the one job is as it was.
    expect((await call("GET", `/glidemq/queues/${queue}/counts`)).json).toMatchObject({ waiting: 1 });
  });
});

describe("glide-mq door extras on a Redis Cluster: every key of a call in one slot", () => {
  const store = openStore("glidemq-cluster");
  let gateway: Gateway;
  const call = caller(() => gateway);
  const newQueue = () => store.track(`gc${randomUUID().slice(0, 8)}`);
  beforeAll(async () => {
    gateway = await createGateway({ config: { backends: { main: store.spec } }, env: {} });
  });
  afterAll(async () => {
    await gateway?.close();
    await store.dispose();
  });

  it("signal, suspended list, usage summary, flow budget and broadcast work against the cluster", async () => {
    const queue = newQueue();
    const { id } = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "s" })).json;
    expect((await call("POST", `/glidemq/queues/${queue}/jobs/${id}/signal`, { name: "go" })).json).toEqual({ resumed: false });
    expect((await call("GET", `/glidemq/queues/${queue}/suspended`)).json).toEqual({ jobs: [] });
    expect((await call("GET", `/glidemq/usage/summary?queues=${queue}`)).json).toMatchObject({ queues: [], jobCount: 0 });
    expect(await call("GET", `/glidemq/queues/${queue}/flows/${id}/budget`)).toMatchObject({ status: 404 });
    expect((await call("GET", `/glidemq/queues/${queue}/flows/${id}/usage`)).json).toMatchObject({ jobCount: 0 });

    const response = await gateway.app.request(`/glidemq/broadcast/${queue}/events?subscription=s1`);
    const published = (await call("POST", `/glidemq/broadcast/${queue}`, { subject: "a.b", data: [1] })).json.id;
    const text = await readEvents(response, (seen) => seen.includes(`id: ${published}\n`));
    expect(text).toContain(`event: message\ndata: {"data":[1],"id":"${published}","subject":"a.b"`);
  });
});
