import { runConformance } from "@switchyard/conformance";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { QLESS_CAPABILITIES, createQlessBackend } from "../src/index.js";
import { qlessProbe } from "../src/testing.js";

// Redis database 1 is this suite's (see the test plan); queue names are random per test.
const url = `${serviceUrl("redis").replace(/\/\d*$/, "")}/1`;
const probeRedis = new Redis(url);

beforeAll(async () => {
  // qless jids are global to a Redis database, and the suite reuses fixed ids ("order-42"), so
  // every run starts from an empty database 1.
  await probeRedis.flushdb();
  // qless's grace period delays redelivery of an expired lease by 10 s; the lease rules wait less.
  await createQlessBackend({ redis: probeRedis }).qless("config.set", Date.now() / 1000, "grace-period", 0);
});

afterAll(async () => {
  probeRedis.disconnect();
});

runConformance({
  name: "qless-redis",
  // Port 1 on loopback: nothing listens there, so every connection is refused.
  createUnreachableBackend: () => createQlessBackend({ url: "redis://127.0.0.1:1/0" }),
  capabilities: QLESS_CAPABILITIES,
  createBackend: async () => {
    const backend = createQlessBackend({ url });
    await backend.ready();
    return backend;
  },
  probe: qlessProbe(probeRedis),
});
