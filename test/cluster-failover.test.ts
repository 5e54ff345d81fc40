import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@switchyard/conformance";
import { glideProbe } from "@switchyard/glidemq-valkey/testing";
import { Cluster } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { type GatewayProcess, startGatewayProcess } from "./support/gateway-process.js";
import { type PrivateRedisCluster, privateRedisCluster } from "./support/private-servers.js";
import { steadyTraffic } from "./support/steady-traffic.js";

/**
 * A primary of a Redis Cluster (three primaries, one replica each, a cluster of this test's own)
 * killed with SIGKILL while clients enqueue through the glide-mq layout: its replica takes over, the
 * gateway follows the new slot map by itself, no request is answered with a 500 or left hanging
 * (those on the failed primary's slots get a 503 until the replica has taken over), and every job
 * a client got a 201 for is on the cluster afterwards, read there directly.
 */
const TIMEOUT_MS = 2_000;
const SLACK_MS = 1_500;
/** Queues spread over the three primaries: every key of a queue shares its `{queue}` hash tag. */
const QUEUES = Array.from({ length: 9 }, (_, i) => `failover-${i}`);

const dir = mkdtempSync(join(tmpdir(), "switchyard-cluster-failover-"));
let cluster: PrivateRedisCluster | undefined;
let gateway: GatewayProcess | undefined;
afterAll(async () => {
  if (gateway?.child.exitCode === null) gateway.child.kill("SIGKILL");
  await cluster?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe("a Redis Cluster primary failing over under traffic on glidemq-valkey", () => {
  it("loses no acknowledged job, answers 503 or 201 throughout, and serves the moved slots again", async () => {
    cluster = await privateRedisCluster();
    gateway = await startGatewayProcess(dir, "failover", {
      backends: { main: { type: "glidemq-valkey", url: `redis://${cluster.seeds}`, options: { cluster: true }, timeoutMs: TIMEOUT_MS } },
    });
    const traffic = steadyTraffic(gateway.url, QUEUES, { deadlineMs: TIMEOUT_MS + SLACK_MS });
    await eventually(async () => traffic.since(0, 201) >= 300, "300 jobs acknowledged before the failure", 30_000);

    // The primary of the first queue's slot fails; its replica must take over.
    const victim = cluster.primaryFor(`glide:{${QUEUES[0]}}:id`);
    const struck = QUEUES.filter((queue) => cluster!.primaryFor(`glide:{${queue}}:id`) === victim);
    const replica = cluster.nodes().find((node) => node.masterId === cluster!.nodes().find((n) => n.port === victim)!.id)!;
    const down = Date.now();
    await cluster.crash(victim);
    await eventually(
      async () => cluster!.nodes().find((node) => node.port === replica.port)?.role === "master",
      "the replica to take over",
      30_000,
    );
    const promoted = Date.now();
    // The gateway, not restarted, reaches the moved slots on the new primary.
    for (const queue of struck)
      await eventually(async () => traffic.since(promoted, 201, queue) >= 20, `${queue} to be served again`, 30_000);
    await traffic.stop();
    expect(gateway.child.exitCode).toBeNull();

    const unexpected = traffic.answers.filter((answer) => answer.status !== 201 && answer.status !== 503);
    expect(unexpected).toEqual([]);
    for (const refusal of traffic.answers.filter((answer) => answer.status === 503)) {
      expect(refusal.retryAfter).toBe("1");
      expect(refusal.ms).toBeLessThanOrEqual(TIMEOUT_MS + SLACK_MS);
      expect(refusal.at).toBeGreaterThanOrEqual(down - TIMEOUT_MS);
    }
    // Queues on the primaries that stayed up kept being served while the failed one was replaced.
    const spared = QUEUES.filter((queue) => !struck.includes(queue));
    expect(spared.length).toBeGreaterThan(0);
    for (const queue of spared)
      expect(traffic.answers.some((a) => a.queue === queue && a.status === 201 && a.at >= down && a.at < promoted)).toBe(true);

    const probe = new Cluster(cluster.seeds.split(",").map((node) => ({ host: "127.0.0.1", port: Number(node.split(":")[1]) })));
    probe.on("error", () => undefined);
    try {
      const lost: Array<{ queue: string; id: string }> = [];
      for (const job of traffic.acknowledged) if ((await glideProbe(probe).nativeState(job.queue, job.id)) === null) lost.push(job);
      expect(lost).toEqual([]);
    } finally {
      probe.disconnect();
    }
    gateway.child.kill("SIGTERM");
    expect(await gateway.exited).toBe(0);
  }, 60_000);
});
