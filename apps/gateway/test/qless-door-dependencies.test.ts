import { createHash, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { qlessScriptSource } from "@switchyard/qless-redis";
import { Redis } from "ioredis";
import knexFactory from "knex";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { type RunningServer, startServer } from "../src/server.js";

/**
 * qless's dependencies through the RESP door onto Worker Queue tables (SQLite and PostgreSQL) and a
 * Cloudq collection (the MongoDB-compatible server), as a qless client sees them: a job put with
 * `depends` is in the `depends` state, its parents list it among their `dependents`, each completed
 * parent leaves its `dependencies`, the last one releases it, and `cancel` refuses a parent whose
 * dependent is not canceled with it. Checked through the door, and in the PostgreSQL table.
 */
const dir = mkdtempSync(join(tmpdir(), "switchyard-qless-deps-"));
const table = `qdeps_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
const pg = knexFactory({ client: "pg", connection: serviceUrl("postgres") });
const mongoDatabase = `qless_deps_${randomUUID().slice(0, 8)}`;
const QLESS = qlessScriptSource();
const QLESS_SHA = createHash("sha1").update(QLESS).digest("hex");
let server: RunningServer;
let redis: Redis;

beforeAll(async () => {
  server = await startServer({
    config: {
      backends: {
        lite: { type: "workerqueue-sql", url: `sqlite:${join(dir, "deps.sqlite")}` },
        pg: { type: "workerqueue-sql", url: serviceUrl("postgres"), options: { table } },
        // Completed jobs kept, as qless keeps them.
        mongo: { type: "cloudq-mongo", url: serviceUrl("mongo"), options: { database: mongoDatabase, completion: "mark-deleted" } },
      },
      routes: [
        { pattern: "pg-*", backend: "pg" },
        { pattern: "mongo-*", backend: "mongo" },
        { pattern: "*", backend: "lite" },
      ],
      doors: { resp: { port: 0 } },
    },
    port: 0,
    host: "127.0.0.1",
    env: {},
  });
  redis = new Redis({ port: server.respPort as number, host: "127.0.0.1", maxRetriesPerRequest: 0 });
  await redis.script("LOAD", QLESS);
});
afterAll(async () => {
  redis?.disconnect();
  await server?.close();
  await pg.schema.dropTableIfExists(table);
  await pg.schema.dropTableIfExists(`${table}_paused_queues`);
  await pg.schema.dropTableIfExists(`${table}_sy_recurring`);
  await pg.destroy();
  const mongo = await new MongoClient(serviceUrl("mongo")).connect();
  await mongo.db(mongoDatabase).dropDatabase();
  await mongo.close();
  rmSync(dir, { recursive: true, force: true });
});

const qless = (command: string, ...args: Array<string | number>) => redis.evalsha(QLESS_SHA, 0, command, Date.now() / 1000, ...args);
const get = async (jid: string) => {
  const reply = await qless("get", jid);
  return reply === null ? null : (JSON.parse(reply as string) as { state: string; dependents: unknown; dependencies: unknown });
};

describe.each([
  { name: "SQLite", prefix: "lite" },
  { name: "PostgreSQL", prefix: "pg" },
  { name: "MongoDB-compatible (Cloudq)", prefix: "mongo" },
])("qless dependencies through the RESP door onto $name", ({ prefix }) => {
  const names = () => {
    const id = randomUUID().slice(0, 8);
    return { queue: `${prefix}-deps-${id}`, a: `a-${id}`, b: `b-${id}`, child: `child-${id}` };
  };

  it("a job put with depends waits for both parents, which list it, and each completion leaves its dependencies", async () => {
    const { queue, a, b, child } = names();
    await qless("put", "producer", queue, a, "K", "{}", 0);
    await qless("put", "producer", queue, b, "K", "{}", 0);
    await qless("put", "producer", queue, child, "K", "{}", 0, "depends", JSON.stringify([a, b]));
    expect(await get(child)).toMatchObject({ state: "depends", dependencies: [a, b], dependents: {} });
    expect(await get(a)).toMatchObject({ state: "waiting", dependents: [child] });
    if (prefix === "pg") {
      expect(await pg(table).where({ sy_queue: queue, sy_job_id: child }).first()).toMatchObject({
        status: "pending",
        locked_queue_id: "sy:blocked",
      });
    }

    const popped = JSON.parse((await qless("pop", queue, "worker", 5)) as string) as Array<{ jid: string }>;
    expect(popped.map((job) => job.jid)).toEqual([a, b]);
    await qless("complete", a, "worker", queue, "{}");
    expect(await get(child)).toMatchObject({ state: "depends", dependencies: [b] });
    expect(await get(a)).toMatchObject({ state: "complete", dependents: {} });
    await qless("complete", b, "worker", queue, "{}");
    expect(await get(child)).toMatchObject({ state: "waiting", dependencies: {} });
    expect(JSON.parse((await qless("pop", queue, "worker", 5)) as string)).toMatchObject([{ jid: child }]);
  });

  it("cancel refuses a parent whose dependent is not canceled with it, changing nothing; with it, both go", async () => {
    const { queue, a, child } = names();
    await qless("put", "producer", queue, a, "K", "{}", 0);
    await qless("put", "producer", queue, child, "K", "{}", 0, "depends", JSON.stringify([a]));
    await expect(qless("cancel", a)).rejects.toThrow(`Cancel(): ${a} is a dependency of ${child} but is not mentioned to be canceled`);
    expect(await get(a)).toMatchObject({ state: "waiting", dependents: [child] });
    expect(await qless("cancel", a, child)).toEqual([a, child]);
    expect(await get(a)).toBeNull();
    expect(await get(child)).toBeNull();
  });

  it("a put or an advance waiting on an unfinished job of another queue is refused, writing nothing, never a silent drop", async () => {
    const { queue, a, b, child } = names();
    const other = `${queue}-other`;
    await qless("put", "producer", other, a, "K", "{}", 0);
    await expect(qless("put", "producer", queue, child, "K", "{}", 0, "depends", JSON.stringify([a]))).rejects.toThrow(
      `UNSUPPORTED: qless's put with depends of a job in ${queue} on job ${a} of queue ${other}`,
    );
    expect(await get(child)).toBeNull();
    await qless("put", "producer", queue, b, "K", "{}", 0);
    await qless("pop", queue, "worker", 1);
    await expect(qless("complete", b, "worker", queue, "{}", "next", queue, "depends", JSON.stringify([a]))).rejects.toThrow(/UNSUPPORTED/);
    expect(await get(b)).toMatchObject({ state: "running" });
  });

  it("depends on/off changes what a blocked job waits for (Worker Queue tables and Cloudq can)", async () => {
    const { queue, a, b, child } = names();
    await qless("put", "producer", queue, a, "K", "{}", 0);
    await qless("put", "producer", queue, b, "K", "{}", 0);
    await qless("put", "producer", queue, child, "K", "{}", 0, "depends", JSON.stringify([a]));
    expect(await qless("depends", child, "on", b, "missing-jid")).toBe(1);
    expect(await get(child)).toMatchObject({ state: "depends", dependencies: [a, b] });
    expect(await get(b)).toMatchObject({ dependents: [child] });
    await qless("depends", child, "off", a);
    expect(await get(child)).toMatchObject({ state: "depends", dependencies: [b] });
    await qless("depends", child, "off", "all");
    expect(await get(child)).toMatchObject({ state: "waiting", dependencies: {} });
    await expect(qless("depends", child, "on", a)).rejects.toThrow(`Depends(): Job ${child} not in the depends state: waiting`);
  });

  it("cancel skips a completed job, as qless does, and keeps it", async () => {
    const { queue, a } = names();
    await qless("put", "producer", queue, a, "K", "{}", 0);
    await qless("pop", queue, "worker", 1);
    await qless("complete", a, "worker", queue, "{}");
    expect(await qless("cancel", a)).toEqual([a]);
    expect(await get(a)).toMatchObject({ state: "complete" });
  });
});
