import { runConformance } from "@switchyard/conformance";
import { Cluster } from "ioredis";
import { afterAll } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { GLIDEMQ_CAPABILITIES, clusterNodes, createGlideMqBackend } from "../src/index.js";
import { glideProbe } from "../src/testing.js";
import { recordingQueues, removeQueues } from "./support/cleanup.js";

// The 3-primary Redis Cluster the test command starts on loopback: every key of a queue shares its
// `{queue}` hash tag, so each script call runs on the one primary that owns the queue's slot.
const nodes = clusterNodes(serviceUrl("redis-cluster"));
const probeClient = new Cluster(nodes);
const used = new Set<string>();
afterAll(async () => {
  await removeQueues(probeClient, used);
  await probeClient.quit();
});

runConformance({
  name: "glidemq-valkey (cluster)",
  createBackend: async () => {
    const backend = createGlideMqBackend({ url: `redis://${serviceUrl("redis-cluster")}`, cluster: true });
    await backend.ready();
    return recordingQueues(backend, used);
  },
  probe: glideProbe(probeClient),
  capabilities: GLIDEMQ_CAPABILITIES,
});
