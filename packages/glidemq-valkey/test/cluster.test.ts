import { randomUUID } from "node:crypto";
import { eventually } from "@switchyard/conformance";
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { GlideProducer, GlideWorker, clusterNodes, jobCounts, loadScripts, queueKeys } from "../src/index.js";
import { removeQueues } from "./support/cleanup.js";

// The glide-mq-shaped layer on the 3-primary cluster: queues land on different primaries by their
// hash tag, and each queue's keys stay together on one of them.
let cluster: Cluster;
const used = new Set<string>();
const queue = () => {
  const name = `cl-${randomUUID().slice(0, 8)}`;
  used.add(name);
  return name;
};
beforeAll(async () => {
  cluster = new Cluster(clusterNodes(serviceUrl("redis-cluster")));
  await loadScripts(cluster);
});
afterAll(async () => {
  await removeQueues(cluster, used);
  await cluster.quit();
});

describe("glidemq-valkey on a Redis Cluster", () => {
  it("every key of a queue is in the slot of its {queue} hash tag", async () => {
    const q = queue();
    const producer = new GlideProducer(cluster, q);
    await producer.add("a", 1, { priority: 2 });
    await producer.add("b", 2, { deduplication: { id: "x" } });
    const slots = new Set<number>();
    for (const node of cluster.nodes("master")) {
      for (const key of await node.keys(`${queueKeys(q).base}*`)) slots.add(Number(await node.call("CLUSTER", "KEYSLOT", key)));
    }
    expect(slots.size).toBe(1);
  });

  it("GlideWorker processes the jobs of several queues at concurrency 5, with balanced bookkeeping", async () => {
    const queues = Array.from({ length: 3 }, () => queue());
    const workers = queues.map(
      (q) => new GlideWorker(cluster, q, (job) => ({ echo: job.data }), { concurrency: 5, promotionInterval: 50, blockTimeout: 200 }),
    );
    for (const q of queues) {
      await new GlideProducer(cluster, q).addBulk(
        Array.from({ length: 40 }, (_, i) => ({ name: "n", data: i, opts: i % 4 === 0 ? { lifo: true } : {} })),
      );
    }
    await Promise.all(workers.map((w) => w.start()));
    for (const q of queues) {
      // Generous: on a loaded machine (the whole suite at once) three queues' 120 jobs can take a while.
      await eventually(async () => (await jobCounts(cluster, queueKeys(q))).completed === 40, `40 completions in ${q}`, 30_000);
    }
    await Promise.all(workers.map((w) => w.close()));
    for (const q of queues) {
      expect(await jobCounts(cluster, queueKeys(q))).toEqual({ waiting: 0, active: 0, delayed: 0, completed: 40, failed: 0 });
      expect(await cluster.get(queueKeys(q).listActive)).toBe("0");
    }
  }, 120_000);
});
