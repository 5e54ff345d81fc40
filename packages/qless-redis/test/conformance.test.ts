import { runConformance } from "@switchyard/conformance";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { QLESS_CAPABILITIES, createQlessBackend } from "../src/index.js";

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

/** The queue a qless job hash belongs to, read the way qless keeps it (completed jobs: last put). */
async function queueOf(jid: string): Promise<string | null> {
  const queue = await probeRedis.hget(`ql:j:${jid}`, "queue");
  if (queue === null) return null;
  if (queue !== "") return queue;
  const imported = await probeRedis.hget(`ql:j:${jid}`, "switchyard.queue");
  if (imported) return imported;
  const history = (await probeRedis.lrange(`ql:j:${jid}-history`, 0, -1)).map((entry) => JSON.parse(entry));
  const lastPut = history.filter((entry) => entry[1] === "put").at(-1);
  return lastPut?.[2]?.q ?? null;
}

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
  probe: {
    // The `state` field of the ql:j:<jid> hash, as qless workers read it.
    async nativeState(queue, id) {
      if ((await queueOf(id)) !== queue) return null;
      return probeRedis.hget(`ql:j:${id}`, "state");
    },
    async countJobs(queue) {
      const keys = (await probeRedis.keys("ql:j:*")).filter((key) => !/-(history|dependencies|dependents)$/.test(key));
      let count = 0;
      for (const key of keys) if ((await queueOf(key.slice("ql:j:".length))) === queue) count++;
      return count;
    },
    expectedStates: {
      waiting: ["waiting"],
      delayed: ["scheduled"],
      active: ["running"],
      completed: ["complete"],
      failed: ["failed"],
      blocked: ["depends"],
      canceled: [null],
    },
  },
});
