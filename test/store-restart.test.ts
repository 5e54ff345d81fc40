import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cloudqProbe } from "@switchyard/cloudq-mongo/testing";
import { eventually } from "@switchyard/conformance";
import { glideProbe } from "@switchyard/glidemq-valkey/testing";
import { qlessProbe } from "@switchyard/qless-redis/testing";
import { workerQueueProbe } from "@switchyard/workerqueue-sql/testing";
import { Redis } from "ioredis";
import knexFactory from "knex";
import { MongoClient } from "mongodb";
import { afterAll, describe, expect, it } from "vitest";
import { type GatewayProcess, startGatewayProcess } from "./support/gateway-process.js";
import { type PrivateServer, privateFerretDb, privatePostgres, privateRedis } from "./support/private-servers.js";
import { serviceUrl } from "./support/services.js";
import { steadyTraffic } from "./support/steady-traffic.js";

/**
 * A store stopped abruptly and started again while clients keep enqueueing through one gateway
 * process: while it is down every request is answered, within the backend's timeoutMs, with a 503
 * that names the backend and carries Retry-After (never a 500, never a request left hanging); once
 * it is back the same gateway process serves again without being restarted; and every job a client
 * got a 201 for is in the store afterwards, read there directly. Each store is a server of this
 * test's own (test/support/private-servers.ts), so crashing it disturbs no other suite.
 */
const TIMEOUT_MS = 1_000;
/** What the answer may take beyond timeoutMs on a busy two-core machine: the deadline's own timer and the HTTP round trip. */
const SLACK_MS = 1_500;

interface StoreCase {
  what: string;
  /** Starts the server and says how the gateway reaches it and how to read a job there. */
  open(): Promise<{
    server: PrivateServer;
    backends: Record<string, { type: string; url: string; options?: Record<string, unknown> }>;
    /** One queue per backend, each routed to its backend. */
    queues: Record<string, string>;
    /** The job's state as the store holds it, read directly; null when there is no record. */
    nativeState(queue: string, id: string): Promise<string | null>;
    close(): Promise<void>;
  }>;
}

const CASES: StoreCase[] = [
  {
    what: "Redis (qless-redis and glidemq-valkey)",
    async open() {
      const server = await privateRedis();
      const redis = new Redis(server.url);
      // The probe's connection drops with the server too; it reconnects by itself before it is read.
      redis.on("error", () => undefined);
      const qless = qlessProbe(redis);
      const glide = glideProbe(redis);
      return {
        server,
        backends: { qless: { type: "qless-redis", url: server.url }, glide: { type: "glidemq-valkey", url: server.url } },
        queues: { qless: "qless-steady", glide: "glide-steady" },
        nativeState: (queue, id) => (queue.startsWith("qless") ? qless : glide).nativeState(queue, id),
        close: async () => redis.disconnect(),
      };
    },
  },
  {
    what: "PostgreSQL (workerqueue-sql)",
    async open() {
      const server = await privatePostgres();
      const knex = knexFactory({ client: "pg", connection: server.url, pool: { min: 0, max: 2 } });
      return {
        server,
        backends: { sql: { type: "workerqueue-sql", url: server.url } },
        queues: { sql: "steady" },
        nativeState: (queue, id) => workerQueueProbe(knex, "jobs", "postgres").nativeState(queue, id),
        close: () => knex.destroy(),
      };
    },
  },
  {
    what: "FerretDB (cloudq-mongo)",
    async open() {
      const server = await privateFerretDb(serviceUrl("postgres"));
      const client = new MongoClient(server.url);
      return {
        server,
        backends: { cloudq: { type: "cloudq-mongo", url: server.url, options: { database: "restart" } } },
        queues: { cloudq: "steady" },
        nativeState: (queue, id) => cloudqProbe(() => client, "restart", "queue_state", "remove").nativeState(queue, id),
        close: () => client.close(),
      };
    },
  },
];

const dir = mkdtempSync(join(tmpdir(), "switchyard-store-restart-"));
const processes: GatewayProcess[] = [];
afterAll(() => {
  for (const { child } of processes) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

for (const storeCase of CASES) {
  describe(`${storeCase.what} stopped and restarted under traffic`, () => {
    it("answers 503 with Retry-After while it is down, recovers by itself, and loses no acknowledged job", async () => {
      const { server, backends, queues, nativeState, close } = await storeCase.open();
      try {
        const routes = Object.entries(queues).map(([backend, queue]) => ({ pattern: queue, backend }));
        const withTimeout = Object.fromEntries(Object.entries(backends).map(([name, spec]) => [name, { ...spec, timeoutMs: TIMEOUT_MS }]));
        const gateway = await startGatewayProcess(dir, `restart-${Object.keys(backends).join("-")}`, { backends: withTimeout, routes });
        processes.push(gateway);
        const traffic = steadyTraffic(gateway.url, Object.values(queues), { deadlineMs: TIMEOUT_MS + SLACK_MS });

        await eventually(async () => traffic.since(0, 201) >= 100, "100 jobs acknowledged before the stop", 30_000);
        const down = Date.now();
        await server.crash();
        await eventually(async () => traffic.since(down, 503) >= 40, "503s while the store is down", 30_000);
        const health = await fetch(`${gateway.url}/health`);
        expect(health.status).toBe(503);

        const up = Date.now();
        await server.start();
        // The same gateway process, not restarted, reaches the store again on its own.
        await eventually(async () => traffic.since(up, 201) >= 100, "100 jobs acknowledged after the restart", 30_000);
        await traffic.stop();
        expect(gateway.child.exitCode).toBeNull();
        expect((await fetch(`${gateway.url}/health`)).status).toBe(200);

        const unexpected = traffic.answers.filter((answer) => answer.status !== 201 && answer.status !== 503);
        expect(unexpected).toEqual([]);
        const refusals = traffic.answers.filter((answer) => answer.status === 503);
        expect(refusals.length).toBeGreaterThan(0);
        for (const refusal of refusals) {
          expect(refusal.retryAfter).toBe("1");
          expect(JSON.parse(refusal.body)).toMatchObject({
            error: { code: "BACKEND_UNAVAILABLE", message: expect.stringMatching(/^backend "\w+" \([\w:-]+\) /) },
          });
        }
        const slowest = Math.max(...refusals.map((refusal) => refusal.ms));
        expect(slowest).toBeLessThanOrEqual(TIMEOUT_MS + SLACK_MS);

        const lost: Array<{ queue: string; id: string }> = [];
        for (const job of traffic.acknowledged) if ((await nativeState(job.queue, job.id)) === null) lost.push(job);
        expect(lost).toEqual([]);

        gateway.child.kill("SIGTERM");
        expect(await gateway.exited).toBe(0);
      } finally {
        await close();
        await server.dispose();
      }
    }, 60_000);
  });
}
