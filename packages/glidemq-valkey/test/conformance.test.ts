import { runConformance } from "@switchyard/conformance";
import { Redis } from "ioredis";
import { afterAll } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { GLIDEMQ_CAPABILITIES, createGlideMqBackend } from "../src/index.js";
import { glideProbe } from "../src/testing.js";
import { recordingQueues, removeQueues } from "./support/cleanup.js";

// Standalone Redis, logical database 4 (glide-mq conformance).
const url = `${serviceUrl("redis")}/4`;
const probeClient = new Redis(url);
const used = new Set<string>();
afterAll(async () => {
  await removeQueues(probeClient, used);
  await probeClient.quit();
});

runConformance({
  name: "glidemq-valkey (standalone)",
  // Port 1 on loopback: nothing listens there, so every connection is refused.
  createUnreachableBackend: () => createGlideMqBackend({ url: "redis://127.0.0.1:1", stalledRecovery: false }),
  createBackend: async () => {
    const backend = createGlideMqBackend({ url });
    await backend.ready();
    return recordingQueues(backend, used);
  },
  probe: glideProbe(probeClient),
  capabilities: GLIDEMQ_CAPABILITIES,
});
