import { randomUUID } from "node:crypto";
import { type Gateway, createGateway } from "@switchyard/gateway";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "./matrix-backends.js";
import { caller } from "./support/glide-door.js";

/**
 * POST /flows beyond a plain tree, on a glidemq-valkey store (database 1): a tree with a budget
 * (FlowProducer.add's `budget:<flowId>` hash and every job's `budgetKey`) and a DAG
 * (FlowProducer.addDAG's layout and the proxy's record), probed in Redis, run through the gateway's
 * worker routes, refused with nothing written when glide-mq would refuse them. Compared with glide-mq's
 * own proxy in glidemq-door-extras-real.test.ts (GLIDEMQ_PATH).
 */

describe("glide-mq door on a glidemq-valkey store: POST /flows with a budget or a DAG", () => {
  const store = openStore("glidemq", 1);
  let gateway: Gateway;
  let redis: Redis;
  const call = caller(() => gateway);
  const newQueue = () => store.track(`gd${randomUUID().slice(0, 8)}`);
  beforeAll(async () => {
    gateway = await createGateway({ config: { backends: { main: store.spec } }, env: {} });
    redis = new Redis(store.spec.url as string);
  });
  afterAll(async () => {
    redis?.disconnect();
    await gateway?.close();
    await store.dispose();
  });

  describe("POST /flows with a budget", () => {
    it("writes the budget hash FlowProducer.add writes and names it in every job's budgetKey; GET /flows/:id shows budget and usage", async () => {
      const queue = newQueue();
      const other = newQueue();
      const p = `glide:{${queue}}`;
      const budget = { maxTotalTokens: 100, tokenWeights: { input: 2 }, costUnit: "usd", onExceeded: "pause" };
      const added = await call("POST", "/glidemq/flows", {
        flow: { name: "parent", queueName: queue, data: {}, children: [{ name: "child", queueName: other, data: { c: 1 } }] },
        budget,
      });
      expect(added.status).toBe(201);
      const flowId = added.json.flowId as string;
      const budgetKey = `${p}:budget:${flowId}`;
      expect(await redis.hgetall(budgetKey)).toEqual({
        usedTokens: "0",
        usedCost: "0",
        exceeded: "0",
        onExceeded: "pause",
        maxTotalTokens: "100",
        tokenWeights: '{"input":2}',
        costUnit: "usd",
      });
      const childId = (await redis.smembers(`${p}:deps:${flowId}`))[0]!.split(":").at(-1)!;
      expect(await redis.hget(`${p}:job:${flowId}`, "budgetKey")).toBe(budgetKey);
      expect(await redis.hget(`glide:{${other}}:job:${childId}`, "budgetKey")).toBe(budgetKey);
      expect((await call("GET", `/glidemq/queues/${queue}/flows/${flowId}/budget`)).json).toEqual({
        maxTotalTokens: 100,
        tokenWeights: { input: 2 },
        costUnit: "usd",
        usedTokens: 0,
        usedCost: 0,
        exceeded: false,
        onExceeded: "pause",
      });
      await redis.hset(`glide:{${other}}:job:${childId}`, "usage:model", "m", "usage:totalTokens", "7");
      const state = (await call("GET", `/glidemq/flows/${flowId}`)).json;
      expect(state.budget).toMatchObject({ maxTotalTokens: 100, onExceeded: "pause" });
      expect(state.usage).toEqual({ tokens: {}, totalTokens: 7, costs: {}, totalCost: 0, jobCount: 1, models: { m: 1 } });
      const child = state.nodes.find((node: { id: string; queueName: string }) => node.id === childId && node.queueName === other);
      expect(child.usage).toEqual({ model: "m", totalTokens: 7 });
    });

    it("a bad budget, or a budget on a DAG, is a 400 and writes nothing", async () => {
      const queue = newQueue();
      const flow = { name: "parent", queueName: queue, data: {} };
      for (const [budget, error] of [
        ["x", "budget must be an object"],
        [{ maxTotalTokens: -1 }, "budget.maxTotalTokens must be a non-negative number"],
        [{ maxTokens: { input: "5" } }, "budget.maxTokens must be a non-negative number"],
        [{ onExceeded: "stop" }, "budget.onExceeded must be one of: pause, fail"],
      ] as const) {
        expect(await call("POST", "/glidemq/flows", { flow, budget }), JSON.stringify(budget)).toMatchObject({
          status: 400,
          json: { error },
        });
      }
      expect(
        await call("POST", "/glidemq/flows", { dag: { nodes: [{ name: "a", queueName: queue, data: 1 }] }, budget: {} }),
      ).toMatchObject({
        status: 400,
        json: { error: "budget is currently supported only for tree flows" },
      });
      expect(await redis.keys(`glide:{${queue}}:*`)).toEqual([]);
    });
  });

  describe("POST /flows with a DAG", () => {
    it("writes FlowProducer.addDAG's layout and the proxy's record; the gateway's workers then run each node after its deps", async () => {
      const [q, other] = [newQueue(), newQueue()];
      const [p, o] = [`glide:{${q}}`, `glide:{${other}}`];
      const nodes = [
        { name: "a", queueName: q, data: { step: "a" } },
        { name: "b", queueName: q, data: null, deps: ["a"] },
        { name: "c", queueName: q, data: null, deps: ["a"] },
        { name: "d", queueName: q, data: null, deps: ["b", "c"] },
        { name: "e", queueName: other, data: null },
        { name: "f", queueName: other, data: null, deps: ["e"] },
      ];
      const added = await call("POST", "/glidemq/flows", { dag: { nodes } });
      expect(added.status).toBe(201);
      const { flowId, jobs, roots } = added.json;
      expect(flowId).toMatch(/^[0-9a-f]{24}$/);
      expect(added.json).toMatchObject({ kind: "dag", nodeCount: 6 });
      expect(jobs.map((job: { name: string; queueName: string }) => [job.name, job.queueName])).toEqual(
        nodes.map((n) => [n.name, n.queueName]),
      );
      const id = Object.fromEntries(jobs.map((job: { id: string; name: string }) => [job.name, job.id])) as Record<string, string>;
      expect(roots).toEqual([
        { jobId: id.a, queueName: q },
        { jobId: id.e, queueName: other },
      ]);

      // a: two dependents, listed (parentIds) and wired (its parents set, their deps sets); ready to run.
      expect(await redis.hgetall(`${p}:job:${id.a}`)).toMatchObject({
        state: "waiting",
        parentIds: JSON.stringify([id.b, id.c]),
        parentQueues: JSON.stringify([q, q]),
        flowId,
      });
      expect((await redis.smembers(`${p}:parents:${id.a}`)).sort()).toEqual([`${p}:${id.b}`, `${p}:${id.c}`].sort());
      for (const name of ["b", "c"]) {
        expect(await redis.hgetall(`${p}:job:${id[name]}`)).toMatchObject({ state: "waiting-children", parentIds: JSON.stringify([id.d]) });
        expect(await redis.smembers(`${p}:deps:${id[name]}`)).toEqual([`${p}:${id.a}`]);
      }
      expect((await redis.smembers(`${p}:deps:${id.d}`)).sort()).toEqual([`${p}:${id.b}`, `${p}:${id.c}`].sort());
      expect(await redis.hget(`${p}:job:${id.d}`, "state")).toBe("waiting-children");
      // e: one dependent, carried as its parent (as addJob's parentId), in f's deps set.
      expect(await redis.hgetall(`${o}:job:${id.e}`)).toMatchObject({ state: "waiting", parentId: id.f, parentQueue: other });
      expect(await redis.smembers(`${o}:deps:${id.f}`)).toEqual([`${o}:${id.e}`]);
      expect(await redis.hgetall(`glide:{flow:${flowId}}:meta`)).toMatchObject({ kind: "dag" });
      expect((await redis.smembers(`glide:{flow:${flowId}}:jobs`)).length).toBe(6);
      expect((await redis.smembers(`glide:{flow:${flowId}}:roots`)).sort()).toEqual([`${q}:${id.a}`, `${other}:${id.e}`].sort());

      // Through the gateway's worker routes, each node runs once its deps completed.
      const run = async (queue: string) => {
        const [job] = (await call("POST", `/glidemq/queues/${queue}/jobs/reserve`, { worker: "w" })).json.jobs;
        if (!job) return undefined;
        await call("POST", `/glidemq/queues/${queue}/jobs/${job.id}/complete`, { worker: "w" });
        return job.name as string;
      };
      expect(await run(q)).toBe("a");
      expect([await run(q), await run(q)].sort()).toEqual(["b", "c"]);
      expect(await run(q)).toBe("d");
      expect(await run(other)).toBe("e");
      expect(await run(other)).toBe("f");
      const state = (await call("GET", `/glidemq/flows/${flowId}`)).json;
      expect(state).toMatchObject({ kind: "dag", counts: { completed: 6 }, flowId });
      const tree = (await call("GET", `/glidemq/flows/${flowId}/tree`)).json.tree;
      expect(
        // Roots in the proxy's order: by queue name, then id.
        tree
          .map((root: { name: string; children: Array<{ name: string }> }) => [root.name, root.children.map((c) => c.name)])
          .sort(),
      ).toEqual([
        ["a", ["b", "c"]],
        ["e", ["f"]],
      ]);
    });

    it("a DAG glide-mq refuses is a 4xx {error} and writes nothing", async () => {
      const q = newQueue();
      const taken = (await call("POST", `/glidemq/queues/${q}/jobs`, { name: "x", opts: { jobId: "taken" } })).json.id;
      const before = (await redis.keys(`glide:{${q}}:*`)).sort();
      const node = (name: string, deps?: string[], opts?: object) => ({
        name,
        queueName: q,
        data: null,
        ...(deps ? { deps } : {}),
        ...(opts ? { opts } : {}),
      });
      for (const [nodes, status, error] of [
        [[node("a", ["b"]), node("b", ["a"])], 400, "DAG contains a cycle: a -> b -> a"],
        [[node("a", ["zz"])], 400, 'Node "a" depends on unknown node "zz"'],
        [[node("a"), node("a")], 400, "Duplicate node name: a"],
        [[{ queueName: q }], 400, "dag.nodes.0.name: missing required field: name"],
        [[{ name: "a", queueName: "x:y" }], 400, "Queue name must not contain curly braces or colons"],
        [[], 400, "dag.nodes: nodes must not be empty"],
        [[node("a"), node("b", ["a"], { jobId: taken })], 409, "Duplicate job ID in DAG"],
        [[node("a", undefined, { lockDuration: 5 })], 400, "opts.lockDuration is not allowed"],
      ] as const) {
        const reply = await call("POST", "/glidemq/flows", { dag: { nodes } });
        expect(reply.status, JSON.stringify(nodes)).toBe(status);
        expect(reply.json.error, JSON.stringify(nodes)).toContain(error);
      }
      expect((await redis.keys(`glide:{${q}}:*`)).sort()).toEqual(before);
      expect(await redis.get(`glide:{${q}}:id`)).toBeNull();
    });
  });
});
