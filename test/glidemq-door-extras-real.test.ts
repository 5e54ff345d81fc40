import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import type { Server as HttpServer } from "node:http";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { eventually } from "@switchyard/conformance";
import { type Gateway, createGateway } from "@switchyard/gateway";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Reply, caller, readEvents } from "./support/glide-door.js";

/*
 * Beside a real glide-mq 0.15.4 (GLIDEMQ_PATH names a build of it): its Worker, FlowProducer,
 * Broadcast and BroadcastWorker, and its own proxy (`glide-mq/proxy`), on a private Redis, so the
 * `glidemq` function library it loads stays off the shared server. The door and the proxy are asked
 * the same questions on the same keys and must answer alike.
 */
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

describe.skipIf(!glidePath)(
  "glide-mq door extras beside a real glide-mq 0.15.4 and its proxy (skipped unless GLIDEMQ_PATH names a build)",
  () => {
    const load = glidePath ? createRequire(import.meta.url) : undefined;
    // biome-ignore lint/suspicious/noExplicitAny: glide-mq is loaded at run time from a path, untyped.
    const glide = load?.(glidePath!) as any;
    let server: ChildProcess;
    let port: number;
    let gateway: Gateway;
    let proxy: { close(): Promise<void> };
    let proxyServer: HttpServer;
    let proxyBase: string;
    const closers: Array<() => Promise<unknown>> = [];
    const call = caller(() => gateway);
    const connection = () => ({ addresses: [{ host: "127.0.0.1", port }] });
    const newQueue = () => `gr${randomUUID().slice(0, 8)}`;
    const clients = new Map<number, Redis>();
    /** A plain client of the private Redis, for probes. */
    const redisOf = (on: number) => {
      if (!clients.has(on)) {
        const client = new Redis({ port: on });
        clients.set(on, client);
        closers.push(async () => client.disconnect());
      }
      return clients.get(on)!;
    };
    /** The same request to glide-mq's proxy. */
    const askProxy = async (method: string, path: string, body?: unknown): Promise<Reply> => {
      const res = await fetch(proxyBase + path, {
        method,
        ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
      });
      const text = await res.text();
      const type = res.headers.get("content-type");
      return { status: res.status, type, text, json: type?.includes("application/json") && text !== "" ? JSON.parse(text) : undefined };
    };
    /** The door's and the proxy's answers to one GET, compared (`/glidemq` prefixed for the door). */
    const sameAnswer = async (path: string, normalise: (json: unknown) => unknown = (json) => json) => {
      const [door, real] = [await call("GET", `/glidemq${path}`), await askProxy("GET", path)];
      expect({ status: door.status, json: normalise(door.json), text: door.json ? "" : door.text }, path).toEqual({
        status: real.status,
        json: normalise(real.json),
        text: real.json ? "" : real.text,
      });
      return door;
    };

    beforeAll(async () => {
      port = await freePort();
      server = spawn("redis-server", ["--port", String(port), "--save", "", "--appendonly", "no"], { stdio: "ignore" });
      const probe = new Redis({ port, lazyConnect: true, retryStrategy: (times) => (times > 100 ? null : 50) });
      await eventually(
        async () =>
          probe.connect().then(
            () => true,
            () => false,
          ),
        "the private Redis to listen",
        10_000,
      );
      probe.disconnect();
      gateway = await createGateway({
        config: { backends: { main: { type: "glidemq-valkey", url: `redis://127.0.0.1:${port}` } } },
        env: {},
      });
      proxy = load!(`${glidePath}/dist/proxy`).createProxyServer({ connection: connection() });
      const proxyPort = await freePort();
      proxyServer = (proxy as unknown as { app: { listen(port: number): HttpServer } }).app.listen(proxyPort);
      proxyBase = `http://127.0.0.1:${proxyPort}`;
    }, 30_000);
    afterAll(async () => {
      for (const close of closers.reverse()) await close().catch(() => undefined);
      await proxy?.close().catch(() => undefined);
      proxyServer?.close();
      await gateway?.close();
      server?.kill("SIGKILL");
    });

    it("a job's output stream, its suspension, the suspended list and flow usage read alike; a door signal resumes glide-mq's job", async () => {
      const queue = newQueue();
      const worker = new glide.Worker(
        queue,
        // biome-ignore lint/suspicious/noExplicitAny: glide-mq's Job.
        async (job: any) => {
          if (job.name === "chat") {
            await job.stream({ token: "Hel" });
            await job.stream({ token: "lo", final: "1" });
            await job.reportUsage({ model: "m1", tokens: { input: 10, output: 5 }, costs: { input: 0.5 }, costUnit: "usd" });
            return "Hello";
          }
          if (job.signals.length === 0) return job.suspend({ reason: "need approval", timeout: 600_000 });
          return job.signals.map((signal: { name: string; data: unknown }) => [signal.name, signal.data]);
        },
        { connection: connection(), promotionInterval: 100 },
      );
      closers.push(() => worker.close());
      const chat = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "chat" })).json.id;
      const approve = (await call("POST", `/glidemq/queues/${queue}/jobs`, { name: "approve", data: { doc: 7 } })).json.id;
      await eventually(
        async () => (await call("GET", `/glidemq/queues/${queue}/jobs/${chat}`)).json.state === "completed",
        "the chat job to complete",
      );
      await eventually(
        async () => (await call("GET", `/glidemq/queues/${queue}/jobs/${approve}/suspend`)).status === 200,
        "the job to suspend",
      );

      const stream = await sameAnswer(`/queues/${queue}/jobs/${chat}/stream`);
      expect(stream.text.split("\n\n").filter(Boolean)).toHaveLength(2);
      await sameAnswer(`/queues/${queue}/jobs/nope/stream`);
      await sameAnswer(`/queues/${queue}/jobs/${approve}/suspend`);
      await sameAnswer(`/queues/${queue}/jobs/${chat}/suspend`);
      await sameAnswer(`/queues/${queue}/suspended`);
      await sameAnswer(`/queues/${queue}/suspended?excludeData=true&start=0&end=0`);
      await sameAnswer(`/queues/${queue}/flows/${chat}/usage`);
      await sameAnswer(`/queues/${queue}/flows/nope/usage`);
      await sameAnswer(`/queues/${queue}/flows/${chat}/budget`);
      const window = (json: unknown) => ({ ...(json as object), startTime: 0, endTime: 0 });
      await sameAnswer(`/usage/summary?queues=${queue}`, window);

      expect(
        (await call("POST", `/glidemq/queues/${queue}/jobs/${approve}/signal`, { name: "approve", data: { by: "ann" } })).json,
      ).toEqual({
        resumed: true,
      });
      const done = await eventually(async () => {
        const job = (await call("GET", `/glidemq/queues/${queue}/jobs/${approve}`)).json;
        return job.state === "completed" ? job : undefined;
      }, "glide-mq's Worker to run the resumed job");
      expect(done.returnvalue).toEqual([["approve", { by: "ann" }]]);
      expect((await askProxy("POST", `/queues/${queue}/jobs/${approve}/signal`, { name: "late" })).json).toEqual(
        (await call("POST", `/glidemq/queues/${queue}/jobs/${approve}/signal`, { name: "late" })).json,
      );
    });

    it("a FlowProducer flow with a budget: its usage and budget read alike through the door and the proxy", async () => {
      const queue = newQueue();
      const flows = new glide.FlowProducer({ connection: connection() });
      closers.push(() => flows.close());
      const node = await flows.add(
        { name: "parent", queueName: queue, data: {}, children: [{ name: "child", queueName: queue, data: { c: 1 } }] },
        { budget: { maxTotalTokens: 100, tokenWeights: { input: 2 }, costUnit: "usd" } },
      );
      const worker = new glide.Worker(
        queue,
        // biome-ignore lint/suspicious/noExplicitAny: glide-mq's Job.
        async (job: any) => {
          await job.reportUsage({ model: "m2", tokens: { input: 3 }, totalCost: 0.25 });
          return job.name;
        },
        { connection: connection(), promotionInterval: 100 },
      );
      closers.push(() => worker.close());
      const flowId = node.job.id as string;
      await eventually(
        async () => (await call("GET", `/glidemq/queues/${queue}/jobs/${flowId}`)).json.state === "completed",
        "the flow to complete",
      );
      await sameAnswer(`/queues/${queue}/flows/${flowId}/usage`);
      const budget = await sameAnswer(`/queues/${queue}/flows/${flowId}/budget`);
      expect(budget.json).toMatchObject({ maxTotalTokens: 100, usedTokens: 12, exceeded: false });
    });

    it("POST /flows with a budget writes what glide-mq's proxy writes, and GET /flows/:id reads alike", async () => {
      const [viaDoor, viaProxy] = [newQueue(), newQueue()];
      const body = (queue: string) => ({
        flow: { name: "parent", queueName: queue, data: {}, children: [{ name: "child", queueName: queue, data: { c: 1 } }] },
        budget: { maxTotalTokens: 50, maxCosts: { input: 1.5 }, costUnit: "usd" },
      });
      const door = (await call("POST", "/glidemq/flows", body(viaDoor))).json;
      const real = (await askProxy("POST", "/flows", body(viaProxy))).json;
      expect(door.nodeCount).toBe(real.nodeCount);
      const hashOf = (queue: string, id: string) => (redisOf(port) as Redis).hgetall(`glide:{${queue}}:budget:${id}`);
      expect(await hashOf(viaDoor, door.flowId)).toEqual(await hashOf(viaProxy, real.flowId));
      const budgetKeys = async (queue: string) => {
        const client = redisOf(port);
        const keys = (await client.keys(`glide:{${queue}}:job:*`)).sort();
        return Promise.all(keys.map(async (key) => (await client.hget(key, "budgetKey"))?.replace(queue, "Q").replace(/\d+$/, "N")));
      };
      expect(await budgetKeys(viaDoor)).toEqual(await budgetKeys(viaProxy));
      await sameAnswer(`/flows/${real.flowId}`, (json) => ({ ...(json as object), createdAt: 0 }));
    });

    it("POST /flows with a DAG leaves the keys glide-mq's proxy leaves, and GET /flows/:id reads alike", async () => {
      /** The DAG's keys with ids named by node, queues by position, times dropped. */
      const layoutOf = async (queues: string[], jobs: Array<{ id: string; name: string; queueName: string }>, flowId: string) => {
        const client = redisOf(port);
        const nameOf = new Map(jobs.map((job) => [`${job.queueName}:${job.id}`, job.name]));
        const queueOf = (queue: string) => `Q${queues.indexOf(queue)}`;
        const member = (raw: string) => {
          const [, queue, id] = /^glide:\{(.*)\}:(.*)$/.exec(raw) ?? [];
          return `${queueOf(queue ?? "")}:${nameOf.get(`${queue}:${id}`)}`;
        };
        const layout: Record<string, unknown> = {};
        for (const job of jobs) {
          const { timestamp: _t, ...hash } = await client.hgetall(`glide:{${job.queueName}}:job:${job.id}`);
          const parentQueues = hash.parentQueues ? (JSON.parse(hash.parentQueues) as string[]) : [];
          layout[job.name] = {
            ...hash,
            id: job.name,
            flowId: hash.flowId === flowId ? "F" : hash.flowId,
            ...(hash.parentId
              ? { parentId: nameOf.get(`${hash.parentQueue}:${hash.parentId}`), parentQueue: queueOf(hash.parentQueue!) }
              : {}),
            ...(hash.parentIds
              ? {
                  parentIds: (JSON.parse(hash.parentIds) as string[]).map((id, i) => nameOf.get(`${parentQueues[i]}:${id}`)),
                  parentQueues: parentQueues.map(queueOf),
                }
              : {}),
            deps: (await client.smembers(`glide:{${job.queueName}}:deps:${job.id}`)).map(member).sort(),
            parents: (await client.smembers(`glide:{${job.queueName}}:parents:${job.id}`)).map(member).sort(),
          };
        }
        for (const queue of queues) {
          const events = (await client.xrange(`glide:{${queue}}:events`, "-", "+")) as Array<[string, string[]]>;
          layout[`events ${queueOf(queue)}`] = events.map(([, f]) => [f[1], nameOf.get(`${queue}:${f[3]}`)]);
          const stream = (await client.xrange(`glide:{${queue}}:stream`, "-", "+")) as Array<[string, string[]]>;
          layout[`stream ${queueOf(queue)}`] = stream.map(([, f]) => nameOf.get(`${queue}:${f[1]}`));
        }
        return layout;
      };
      const dagOf = (q: string, other: string) => ({
        dag: {
          nodes: [
            { name: "a", queueName: q, data: { step: "a" } },
            { name: "b", queueName: q, data: 1, deps: ["a"] },
            { name: "c", queueName: q, data: 2, deps: ["a"], opts: { priority: 3 } },
            { name: "d", queueName: q, data: 3, deps: ["b", "c"] },
            { name: "e", queueName: other, data: null },
            { name: "f", queueName: other, data: null, deps: ["e"] },
          ],
        },
      });
      const [dq, dother, pq, pother] = [newQueue(), newQueue(), newQueue(), newQueue()];
      const door = (await call("POST", "/glidemq/flows", dagOf(dq, dother))).json;
      const real = (await askProxy("POST", "/flows", dagOf(pq, pother))).json;
      const shape = (answer: { jobs: Array<{ name: string }>; roots: unknown[]; kind: string; nodeCount: number }) => ({
        names: answer.jobs.map((job) => job.name),
        roots: answer.roots.length,
        kind: answer.kind,
        nodeCount: answer.nodeCount,
      });
      expect(shape(door)).toEqual(shape(real));
      expect(await layoutOf([dq, dother], door.jobs, door.flowId)).toEqual(await layoutOf([pq, pother], real.jobs, real.flowId));
      await sameAnswer(`/flows/${real.flowId}/tree`, (json) => ({ ...(json as object), createdAt: 0 }));
    });

    it("broadcast: what the door publishes reaches glide-mq's BroadcastWorker, and the door's and the proxy's subscriptions stream it alike", async () => {
      const name = newQueue();
      const received: string[] = [];
      const subscriber = new glide.BroadcastWorker(name, async (job: { name: string }) => void received.push(job.name), {
        connection: connection(),
        subscription: "real",
      });
      closers.push(() => subscriber.close());
      await subscriber.waitUntilReady();
      const door = await gateway.app.request(`/glidemq/broadcast/${name}/events?subscription=door&subjects=orders.>`);
      const proxied = await fetch(`${proxyBase}/broadcast/${name}/events?subscription=proxy&subjects=orders.>`);
      const publisher = new glide.Broadcast(name, { connection: connection() });
      closers.push(() => publisher.close());
      const fromDoor = (await call("POST", `/glidemq/broadcast/${name}`, { subject: "orders.new", data: { o: 1 } })).json.id;
      const fromGlide = await publisher.publish("orders.eu.paid", { o: 2 });
      await call("POST", `/glidemq/broadcast/${name}`, { subject: "users.new" });
      const until = (text: string) => text.includes(`id: ${fromGlide}\n`);
      const [doorText, proxyText] = await Promise.all([readEvents(door, until), readEvents(proxied, until)]);
      expect(doorText).toBe(proxyText);
      expect(doorText).toContain(`id: ${fromDoor}\nevent: message\n`);
      await eventually(async () => received.length === 3, "glide-mq's BroadcastWorker to receive every message");
      expect(received).toEqual(["orders.new", "orders.eu.paid", "users.new"]);
    });
  },
);
