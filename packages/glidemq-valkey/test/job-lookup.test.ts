import { randomUUID } from "node:crypto";
import { hasJobLookup, hasJobRemoval } from "@switchyard/core";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { clusterNodes, createGlideMqBackend, queueKeys } from "../src/index.js";
import { removeQueues } from "./support/cleanup.js";

/**
 * queuesHolding (core's JobLookup): the queues whose job hash `glide:{queue}:job:<id>` exists, found
 * by one EXISTS per known queue instead of a SCAN of the keyspace on every call. Probed against the
 * keys themselves; a second backend stands in for another process sharing the Redis.
 */
const url = `${serviceUrl("redis")}/4`;
let redis: Redis;
const used = new Set<string>();
const queue = (tag: string) => {
  const name = `lookup-${tag}-${randomUUID().slice(0, 8)}`;
  used.add(name);
  return name;
};
const backend = createGlideMqBackend({ url });
const elsewhere = createGlideMqBackend({ url });

beforeAll(async () => {
  redis = new Redis(url);
  await Promise.all([backend.ready(), elsewhere.ready()]);
});
afterAll(async () => {
  await Promise.all([backend.close(), elsewhere.close()]);
  await removeQueues(redis, used);
  await redis.quit();
});

describe("glidemq-valkey: queuesHolding", () => {
  it("names, in name order, every queue holding the id: those another process made before, and those this one uses", async () => {
    expect(hasJobLookup(backend)).toBe(true);
    if (!hasJobLookup(backend)) return;
    const id = `jid-${randomUUID().slice(0, 8)}`;
    const [b, a, other] = [queue("b"), queue("a"), queue("other")];
    // Made by another process before this backend's first lookup: found by the scan that lookup makes.
    await elsewhere.enqueue(b, { name: "held", id });
    await elsewhere.enqueue(other, { name: "held", id: `${id}-not` });
    expect(await backend.queuesHolding(id)).toEqual([b]);
    // Made by this backend after the scan: looked in at once.
    await backend.enqueue(a, { name: "held", id });
    expect(await backend.queuesHolding(id)).toEqual([a, b].sort());
    for (const name of [a, b]) expect(await redis.exists(queueKeys(name).job(id))).toBe(1);
    expect(await redis.exists(queueKeys(other).job(id))).toBe(0);
  });

  it("a removed job is held by no queue any more; an unknown id by none", async () => {
    if (!hasJobLookup(backend)) throw new Error("no JobLookup");
    const name = queue("removed");
    const { job } = await backend.enqueue(name, { name: "gone" });
    expect(await backend.queuesHolding(job.id)).toContain(name);
    if (!hasJobRemoval(backend)) throw new Error("no JobRemoval");
    await backend.remove(name, [job.id]);
    expect(await redis.exists(queueKeys(name).job(job.id))).toBe(0);
    expect(await backend.queuesHolding(job.id)).not.toContain(name);
    expect(await backend.queuesHolding(`never-${randomUUID()}`)).toEqual([]);
  });

  it("look-ups made together go in one script call, each answered with its own id's queues", async () => {
    if (!hasJobLookup(backend)) throw new Error("no JobLookup");
    const tag = randomUUID().slice(0, 8);
    const [a, b] = [queue("together-a"), queue("together-b")];
    const [inA, inBoth, inNone] = [`x-${tag}`, `y-${tag}`, `z-${tag}`];
    await backend.enqueue(a, { name: "held", id: inA });
    await backend.enqueue(a, { name: "held", id: inBoth });
    await backend.enqueue(b, { name: "held", id: inBoth });
    await backend.queuesHolding(inNone); // the queue-name scan, made before the calls counted
    const monitor = await redis.monitor();
    const scriptCalls: string[][] = [];
    monitor.on("monitor", (_time: string, args: string[]) => {
      if (/^eval/i.test(args[0] ?? "") && args.some((arg) => arg.includes(tag))) scriptCalls.push(args);
    });
    try {
      const answers = await Promise.all([inA, inBoth, inNone, inA].map((id) => backend.queuesHolding(id)));
      expect(answers).toEqual([[a], [a, b].sort(), [], [a]]);
      await redis.ping(); // MONITOR's lines of the calls above arrive before this reply
      expect(scriptCalls).toHaveLength(1);
    } finally {
      monitor.disconnect();
    }
  });

  it("looks past the 1,000 keys one EXISTS takes: ids held in queue 1, in queue 1,150 alone, in both, of 1,200", async () => {
    const tag = randomUUID().slice(0, 8);
    const names = Array.from({ length: 1200 }, (_, i) => `lookup-many-${tag}-${String(i).padStart(4, "0")}`);
    const [first, late] = [names[0] as string, names[1149] as string];
    const [inFirst, inLate, inBoth] = [`f-${tag}`, `l-${tag}`, `b-${tag}`];
    // Queues another process made: an id counter each, found by the fresh backend's scan.
    await redis.mset(names.flatMap((name) => [queueKeys(name).id, "0"]));
    for (const [name, id] of [
      [first, inFirst],
      [late, inLate],
      [first, inBoth],
      [late, inBoth],
    ] as const) {
      await elsewhere.enqueue(name, { name: "held", id });
    }
    const fresh = createGlideMqBackend({ url });
    try {
      await fresh.ready();
      if (!hasJobLookup(fresh)) throw new Error("no JobLookup");
      const answers = await Promise.all([inFirst, inLate, inBoth, `none-${tag}`].map((id) => fresh.queuesHolding(id)));
      expect(answers).toEqual([[first], [late], [first, late], []]);
    } finally {
      await fresh.close();
      await removeQueues(redis, new Set([first, late]));
      await redis.del(names.map((name) => queueKeys(name).id));
    }
  });
});

describe("glidemq-valkey: queuesHolding on a Redis Cluster", () => {
  it("finds the job hashes on the primaries that hold their queues", async () => {
    const cluster = new Cluster(clusterNodes(serviceUrl("redis-cluster")));
    const clustered = createGlideMqBackend({ redis: cluster });
    const names = Array.from({ length: 6 }, (_, i) => `lookup-cl${i}-${randomUUID().slice(0, 8)}`);
    try {
      await clustered.ready();
      if (!hasJobLookup(clustered)) throw new Error("no JobLookup");
      const id = `jid-${randomUUID().slice(0, 8)}`;
      const holding = names.filter((_, i) => i % 2 === 0);
      for (const name of holding) await clustered.enqueue(name, { name: "held", id });
      await clustered.enqueue(names[1] as string, { name: "other", id: `${id}-not` });
      expect(await clustered.queuesHolding(id)).toEqual([...holding].sort());
      // Six queues' hash tags spread over the three primaries; each hash is where its slot is.
      for (const name of holding) expect(await cluster.exists(queueKeys(name).job(id))).toBe(1);
    } finally {
      await clustered.close();
      await removeQueues(cluster, new Set(names));
      await cluster.quit();
    }
  });
});
