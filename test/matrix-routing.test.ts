import { randomUUID } from "node:crypto";
import { type Gateway, createGateway } from "@switchyard/gateway";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreUnderTest, openStore } from "./matrix-backends.js";

/**
 * One front door for a mixed fleet: a single gateway routes queues by name pattern to SQLite, qless
 * (Redis database 7), glide-mq (Redis database 8) and Cloudq (MongoDB), and every job lands in the
 * store its route names, probed directly.
 */
describe("one gateway routing queues to every backend", () => {
  const suffix = randomUUID().slice(0, 8);
  const fleet: Record<string, { store: StoreUnderTest; queue: string }> = {
    sql: { store: openStore("sqlite"), queue: `billing-${suffix}` },
    qless: { store: openStore("qless", 7), queue: `ql-${suffix}` },
    glide: { store: openStore("glidemq", 8), queue: `gl-${suffix}` },
    cloudq: { store: openStore("cloudq"), queue: `cq-${suffix}` },
  };
  let gateway: Gateway;

  beforeAll(async () => {
    const backends = Object.fromEntries(Object.entries(fleet).map(([name, { store }]) => [name, store.spec]));
    const routes = [
      { pattern: "ql-*", backend: "qless" },
      { pattern: "gl-*", backend: "glide" },
      { pattern: "cq-*", backend: "cloudq" },
      { pattern: "*", backend: "sql" },
    ];
    gateway = await createGateway({ config: { backends, routes }, env: {} });
    for (const { store, queue } of Object.values(fleet)) for (const name of [queue, `${queue}-r`]) store.track(name);
  });
  afterAll(async () => {
    await gateway?.close();
    await Promise.all(Object.values(fleet).map(({ store }) => store.dispose()));
  });

  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field with expect().
  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> => {
    const init: RequestInit =
      body === undefined ? { method } : { method, body: JSON.stringify(body), headers: { "content-type": "application/json" } };
    const res = await gateway.app.request(path, init);
    return { status: res.status, json: await res.json() };
  };

  it("a job published through the Cloudq door lands in the store its queue is routed to, and in no other", async () => {
    for (const { queue } of Object.values(fleet)) {
      expect(await call("POST", `/cloudq/${queue}`, { job: { klass: "Route", args: [queue] } })).toEqual({
        status: 200,
        json: { status: "success" },
      });
    }
    for (const [name, { queue }] of Object.entries(fleet)) {
      for (const [other, { store }] of Object.entries(fleet)) {
        expect(await store.countJobs(queue), `${queue} in ${other}`).toBe(other === name ? 1 : 0);
      }
    }
  });

  it("GET /v1/queues names each queue with the backend it is routed to, and /health answers for every backend", async () => {
    for (const { queue } of Object.values(fleet)) await call("POST", `/v1/queues/${queue}/jobs`, { name: "listed" });
    const { queues } = (await call("GET", "/v1/queues")).json as { queues: Array<{ name: string; backend: string }> };
    for (const [name, { queue }] of Object.entries(fleet)) expect(queues).toContainEqual({ name: queue, backend: name });
    const health = await call("GET", "/health");
    expect(health.status).toBe(200);
    expect(Object.keys(health.json.backends).sort()).toEqual(["cloudq", "glide", "qless", "sql"]);
  });

  it("a job enqueued through /v1 is reserved through the Cloudq door from whichever backend holds its queue", async () => {
    for (const [name, { queue, store }] of Object.entries(fleet)) {
      const fresh = `${queue}-r`;
      const enqueued = await call("POST", `/v1/queues/${fresh}/jobs`, { name: "Fleet", data: { from: name } });
      const reserved = await call("GET", `/cloudq/${fresh}`);
      expect(reserved.json).toMatchObject({ klass: "Fleet", args: [{ from: name }], id: enqueued.json.job.id });
      expect(store.nativeStates.active).toContain(await store.nativeState(fresh, reserved.json.id));
    }
  });
});

describe("glide-mq connection options in the gateway config", () => {
  it("options.redisOptions reach the connection to every cluster primary (how a cluster gets its credentials)", async () => {
    const store = openStore("glidemq-cluster");
    const connectionName = `sy-matrix-${randomUUID().slice(0, 8)}`;
    const spec = { ...store.spec, options: { ...store.spec.options, redisOptions: { connectionName } } };
    const gateway = await createGateway({ config: { backends: { glide: spec } }, env: {} });
    try {
      const queue = store.track(`gl-opts-${randomUUID().slice(0, 8)}`);
      const res = await gateway.app.request(`/v1/queues/${queue}/jobs`, { method: "POST", body: JSON.stringify({ name: "named" }) });
      expect(res.status).toBe(201);
      expect(await store.countJobs(queue)).toBe(1);
      const seeds = store.spec.url.replace("redis://", "").split(",");
      const named = await Promise.all(
        seeds.map(async (seed) => {
          const node = new Redis(`redis://${seed}`);
          try {
            return String(await node.client("LIST")).includes(`name=${connectionName}`);
          } finally {
            node.disconnect();
          }
        }),
      );
      expect(named).toContain(true);
    } finally {
      await gateway.close();
      await store.dispose();
    }
  });
});
