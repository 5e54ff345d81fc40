import { randomUUID } from "node:crypto";
import { type Gateway, createGateway } from "@switchyard/gateway";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "./matrix-backends.js";

/**
 * The glide-mq door's flow routes (POST /flows, GET /flows/:id and /tree, DELETE /flows/:id) on a
 * glidemq-valkey store in database 1: the jobs, deps sets, stream entries and events are probed as
 * glide-mq's FlowProducer writes them, the parent is released by the door's HTTP workers completing
 * its children (across queues), and the proxy's flow record is read back. On SQLite: 501.
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
      init.body = typeof body === "string" ? body : JSON.stringify(body);
      init.headers = { "content-type": "application/json" };
    }
    const res = await gateway().app.request(path, init);
    const text = await res.text();
    return { status: res.status, json: text === "" ? undefined : JSON.parse(text) };
  };
}

/** The job ids of a stream's entries, oldest first. */
async function streamIds(redis: Redis, key: string): Promise<string[]> {
  return (await redis.xrange(key, "-", "+")).map(([, fields]) => fields[fields.indexOf("jobId") + 1] ?? "");
}

/** `event:jobId` of an events stream, oldest first. */
async function events(redis: Redis, queue: string): Promise<string[]> {
  return (await redis.xrange(`glide:{${queue}}:events`, "-", "+")).map(
    ([, f]) => `${f[f.indexOf("event") + 1]}:${f[f.indexOf("jobId") + 1]}`,
  );
}

describe("glide-mq door flows on a glidemq-valkey store", () => {
  const store = openStore("glidemq", 1);
  let gateway: Gateway;
  let redis: Redis;
  const call = caller(() => gateway);
  const newQueue = () => store.track(`gf${randomUUID().slice(0, 8)}`);
  // Flows are named after their root job; custom root ids keep this suite's records apart from others'.
  const flowIds: string[] = [];
  const newRootId = () => {
    const id = `root-${randomUUID().slice(0, 8)}`;
    flowIds.push(id);
    return id;
  };
  beforeAll(async () => {
    gateway = await createGateway({ config: { backends: { main: store.spec } }, env: {} });
    redis = new Redis(store.spec.url as string);
  });
  afterAll(async () => {
    for (const id of flowIds) await redis.del(`glide:{flow:${id}}:meta`, `glide:{flow:${id}}:jobs`, `glide:{flow:${id}}:roots`);
    redis?.disconnect();
    await gateway?.close();
    await store.dispose();
  });

  /** Reserves the one job ready in `queue` through the door and completes it; answers its id. */
  async function work(queue: string): Promise<string> {
    const reserved = await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w", wait: 2_000 });
    expect(reserved.json.jobs, `a job ready in ${queue}`).toHaveLength(1);
    const id = reserved.json.jobs[0].id as string;
    expect((await call("POST", `/glidemq/queues/${queue}/jobs/${id}/complete`, { worker: "w", returnvalue: `done-${id}` })).status).toBe(
      200,
    );
    return id;
  }

  it("POST /flows writes a nested, cross-queue tree as FlowProducer.add does: sub-flows first, parents waiting-children with their deps sets", async () => {
    const [a, b] = [newQueue(), newQueue()];
    const rootId = newRootId();
    const flow = {
      name: "report",
      queueName: a,
      data: { r: 1 },
      opts: { jobId: rootId },
      children: [
        { name: "fetch", queueName: a, data: { c: 1 } },
        { name: "merge", queueName: b, data: { m: 1 }, children: [{ name: "part", queueName: b, data: { p: 1 }, opts: { attempts: 2 } }] },
      ],
    };
    const added = await call("POST", "/glidemq/flows", { flow });
    const root = { jobId: rootId, queueName: a };
    expect(added).toEqual({ status: 201, json: { flowId: rootId, kind: "tree", nodeCount: 4, root, roots: [root] } });

    // The sub-flow (merge, part) is written first, so it takes b's ids 1 and 2; fetch takes a's id 1.
    expect(await redis.hgetall(`glide:{${a}}:job:${rootId}`)).toMatchObject({
      id: rootId,
      name: "report",
      data: '{"r":1}',
      opts: JSON.stringify({ jobId: rootId }),
      state: "waiting-children",
      attemptsMade: "0",
      flowId: rootId,
    });
    expect((await redis.smembers(`glide:{${a}}:deps:${rootId}`)).sort()).toEqual([`glide:{${a}}:1`, `glide:{${b}}:1`].sort());
    expect(await redis.hgetall(`glide:{${b}}:job:1`)).toMatchObject({
      name: "merge",
      state: "waiting-children",
      parentId: rootId,
      parentQueue: a,
    });
    expect(await redis.smembers(`glide:{${b}}:deps:1`)).toEqual([`glide:{${b}}:2`]);
    expect(await redis.hgetall(`glide:{${b}}:job:2`)).toMatchObject({
      name: "part",
      state: "waiting",
      parentId: "1",
      parentQueue: b,
      maxAttempts: "2",
    });
    expect(await redis.hgetall(`glide:{${a}}:job:1`)).toMatchObject({ name: "fetch", state: "waiting", parentId: rootId, parentQueue: a });
    // Only the leaves are in the streams; each parent's `added` comes after its children's.
    expect(await streamIds(redis, `glide:{${a}}:stream`)).toEqual(["1"]);
    expect(await streamIds(redis, `glide:{${b}}:stream`)).toEqual(["2"]);
    expect(await events(redis, a)).toEqual(["added:1", `added:${rootId}`]);
    expect(await events(redis, b)).toEqual(["added:2", "added:1"]);
    // The proxy's flow record.
    expect(await redis.hgetall(`glide:{flow:${rootId}}:meta`)).toMatchObject({ kind: "tree" });
    expect((await redis.smembers(`glide:{flow:${rootId}}:jobs`)).sort()).toEqual([`${a}:${rootId}`, `${a}:1`, `${b}:1`, `${b}:2`].sort());
    expect(await redis.smembers(`glide:{flow:${rootId}}:roots`)).toEqual([`${a}:${rootId}`]);
  });

  it("a parent is released (waiting, in its stream) once the door's HTTP workers completed its children, also from another queue", async () => {
    const [a, b] = [newQueue(), newQueue()];
    const rootId = newRootId();
    const flow = {
      name: "root",
      queueName: a,
      opts: { jobId: rootId },
      children: [
        { name: "leaf", queueName: a },
        { name: "mid", queueName: b, children: [{ name: "deep", queueName: b }] },
      ],
    };
    expect((await call("POST", "/glidemq/flows", { flow })).status).toBe(201);
    const before = (await call("GET", `/glidemq/flows/${rootId}`)).json;
    expect(before.counts).toEqual({ "waiting-children": 2, waiting: 2 });

    expect(await work(b)).toBe("2"); // deep
    expect(await redis.hgetall(`glide:{${b}}:job:1`)).toMatchObject({
      state: "waiting",
      depsCompleted: "1",
      [`depdone:glide:{${b}}:2`]: "1",
    });
    expect(await work(b)).toBe("1"); // mid: its parent lives in queue a
    expect(await redis.hgetall(`glide:{${a}}:job:${rootId}`)).toMatchObject({
      state: "waiting-children",
      depsCompleted: "1",
      [`depdone:glide:{${b}}:1`]: "1",
    });
    expect(await work(a)).toBe("1"); // leaf: the last child
    expect(await redis.hget(`glide:{${a}}:job:${rootId}`, "state")).toBe("waiting");
    expect(await streamIds(redis, `glide:{${a}}:stream`)).toEqual([rootId]);
    expect(await work(a)).toBe(rootId);

    const after = await call("GET", `/glidemq/flows/${rootId}`);
    expect(after.status).toBe(200);
    expect(after.json).toMatchObject({
      flowId: rootId,
      kind: "tree",
      counts: { completed: 4 },
      roots: [{ jobId: rootId, queueName: a }],
      budget: null,
      // The root's usage, as the proxy's getFlowUsage answers it: nothing reported, zero sums.
      usage: { tokens: {}, totalTokens: 0, costs: {}, totalCost: 0, jobCount: 0, models: {} },
    });
    expect(after.json.nodes).toHaveLength(4);
    expect(after.json.nodes.find((node: { id: string; queueName: string }) => node.id === "1" && node.queueName === b)).toMatchObject({
      name: "mid",
      flowId: rootId,
      parentId: rootId,
      parentQueue: a,
      returnvalue: "done-1",
    });
  });

  it("GET /flows/:id/tree draws each job under its parent; an unknown flow is 404 {error: 'Flow not found'}", async () => {
    const [a, b] = [newQueue(), newQueue()];
    const rootId = newRootId();
    const flow = {
      name: "top",
      queueName: a,
      opts: { jobId: rootId },
      children: [{ name: "sub", queueName: b, children: [{ name: "leaf", queueName: b }] }],
    };
    await call("POST", "/glidemq/flows", { flow });
    const tree = await call("GET", `/glidemq/flows/${rootId}/tree`);
    expect(tree.status).toBe(200);
    expect(tree.json.nodes).toBeUndefined();
    const [top] = tree.json.tree;
    expect(top).toMatchObject({ id: rootId, name: "top", queueName: a, state: "waiting-children" });
    expect(top.children.map((node: { name: string }) => node.name)).toEqual(["sub"]);
    expect(top.children[0].children.map((node: { name: string; state: string }) => [node.name, node.state])).toEqual([["leaf", "waiting"]]);
    expect(await call("GET", `/glidemq/flows/nope-${randomUUID()}`)).toEqual({ status: 404, json: { error: "Flow not found" } });
  });

  it("DELETE /flows/:id revokes the jobs not finished, skips finished ones, and forgets the record", async () => {
    const a = newQueue();
    const rootId = newRootId();
    await call("POST", "/glidemq/flows", {
      flow: {
        name: "p",
        queueName: a,
        opts: { jobId: rootId },
        children: [
          { name: "c1", queueName: a },
          { name: "c2", queueName: a },
        ],
      },
    });
    await work(a); // c1 completes
    const removed = await call("DELETE", `/glidemq/flows/${rootId}`);
    expect(removed.status).toBe(200);
    expect(removed.json).toMatchObject({ flowId: rootId, flagged: 0, revoked: 2, skipped: 1 });
    expect(await redis.hmget(`glide:{${a}}:job:${rootId}`, "state", "revoked")).toEqual(["failed", "1"]);
    expect(await redis.exists(`glide:{flow:${rootId}}:meta`)).toBe(0);
    expect((await call("GET", `/glidemq/flows/${rootId}`)).status).toBe(404);
  });

  it("a bad body is a 4xx {error} naming what is wrong, and nothing of the flow is written", async () => {
    const a = newQueue();
    const taken = `taken-${randomUUID().slice(0, 8)}`;
    await call("POST", `/glidemq/queues/${a}/jobs`, { name: "x", opts: { jobId: taken } });
    const before = await redis.keys(`glide:{${a}}:*`);
    const cases: Array<[unknown, number, string]> = [
      [{}, 400, "Body must include exactly one of: flow, dag"],
      [{ flow: { name: "p", queueName: a }, dag: { nodes: [] } }, 400, "Body must include exactly one of: flow, dag"],
      [{ flow: { name: "p" } }, 400, "flow.queueName: missing required field: queueName"],
      [{ flow: { name: "p", queueName: a, children: [{ queueName: a }] } }, 400, "flow.children.0.name: missing required field: name"],
      [
        { flow: { name: "p", queueName: a, children: [{ name: "c", queueName: a, opts: { lockDuration: 5 } }] } },
        400,
        "opts.lockDuration is not allowed",
      ],
      [{ flow: { name: "p", queueName: "bad:name", children: [{ name: "c", queueName: a }] } }, 400, "bad:name"],
      [
        {
          flow: {
            name: "p",
            queueName: a,
            children: [
              { name: "c", queueName: a },
              { name: "d", queueName: a, opts: { jobId: taken } },
            ],
          },
        },
        409,
        "Duplicate job ID in flow",
      ],
      ["{not json", 400, "Bad request"],
      [{ dag: { nodes: [{ name: "n", queueName: a, deps: ["n"] }] } }, 400, "DAG contains a cycle: n -> n"],
    ];
    for (const [body, status, message] of cases) {
      const reply = await call("POST", "/glidemq/flows", body);
      expect(reply.status, JSON.stringify(body)).toBe(status);
      expect(reply.json.error, JSON.stringify(body)).toContain(message);
    }
    // The duplicate was refused before the first write: no id taken, no job, no event.
    expect((await redis.keys(`glide:{${a}}:*`)).sort()).toEqual(before.sort());
    expect(await redis.get(`glide:{${a}}:id`)).toBeNull();
  });
});

describe("glide-mq door flows over SQLite: 501 naming the backend", () => {
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

  it("POST /flows, GET /flows/:id, /tree and DELETE answer 501 {error} naming the backend type", async () => {
    const queue = store.track(`gs${randomUUID().slice(0, 8)}`);
    const kind = gateway.backends.get("main")!.backend.kind;
    for (const [method, path, body] of [
      ["POST", "/glidemq/flows", { flow: { name: "p", queueName: queue, children: [{ name: "c", queueName: queue }] } }],
      ["GET", "/glidemq/flows/1", undefined],
      ["GET", "/glidemq/flows/1/tree", undefined],
      ["DELETE", "/glidemq/flows/1", undefined],
    ] as const) {
      const reply = await call(method, path, body);
      expect(reply.status, path).toBe(501);
      expect(reply.json.error, path).toContain(kind);
    }
  });
});
