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
import type { ConfigInput } from "../src/config.js";
import { type RunningServer, startServer } from "../src/server.js";

/**
 * qless's recurring jobs through the RESP door onto Worker Queue tables (SQLite, PostgreSQL), a
 * Cloudq collection and a glide-mq store: the definition kept in the store's side table, collection or keys (probed there), its
 * instances added by pops as qless adds them, and two gateways popping the same store at once adding
 * each instance once.
 */
const dir = mkdtempSync(join(tmpdir(), "switchyard-qless-recur-"));
const table = `qrecur_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
const pg = knexFactory({ client: "pg", connection: serviceUrl("postgres") });
const mongoDatabase = `qless_recur_${randomUUID().slice(0, 8)}`;
const redisUrl = `${serviceUrl("redis").replace(/\/\d*$/, "")}/13`;
const QLESS = qlessScriptSource();
const QLESS_SHA = createHash("sha1").update(QLESS).digest("hex");
const config: ConfigInput = {
  backends: {
    lite: { type: "workerqueue-sql", url: `sqlite:${join(dir, "recur.sqlite")}` },
    pg: { type: "workerqueue-sql", url: serviceUrl("postgres"), options: { table } },
    mongo: { type: "cloudq-mongo", url: serviceUrl("mongo"), options: { database: mongoDatabase, completion: "mark-deleted" } },
    glide: { type: "glidemq-valkey", url: redisUrl },
  },
  routes: [
    { pattern: "pg-*", backend: "pg" },
    { pattern: "mongo-*", backend: "mongo" },
    { pattern: "glide-*", backend: "glide" },
    { pattern: "*", backend: "lite" },
  ],
  doors: { resp: { port: 0 } },
};
/** Two gateways on the same stores, as two processes behind one balancer. */
const servers: RunningServer[] = [];
const clients: Redis[] = [];

beforeAll(async () => {
  for (let i = 0; i < 2; i++) {
    const server = await startServer({ config, port: 0, host: "127.0.0.1", env: {} });
    const client = new Redis({ port: server.respPort as number, host: "127.0.0.1", maxRetriesPerRequest: 0 });
    await client.script("LOAD", QLESS);
    servers.push(server);
    clients.push(client);
  }
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  for (const server of servers) await server.close();
  for (const suffix of ["", "_paused_queues", "_sy_recurring"]) await pg.schema.dropTableIfExists(`${table}${suffix}`);
  await pg.destroy();
  const mongo = await new MongoClient(serviceUrl("mongo")).connect();
  await mongo.db(mongoDatabase).dropDatabase();
  await mongo.close();
  rmSync(dir, { recursive: true, force: true });
});

const qlessOn = (client: Redis, command: string, now: number, ...args: Array<string | number>) =>
  client.evalsha(QLESS_SHA, 0, command, now, ...args);
const qless = (command: string, now: number, ...args: Array<string | number>) => qlessOn(clients[0]!, command, now, ...args);
/** The jids of a pop or peek reply; an empty one is `{}`, as cjson encodes an empty list. */
const jidsOf = (reply: unknown): string[] => {
  const jobs = JSON.parse(reply as string) as Array<{ jid: string }> | Record<string, never>;
  return Array.isArray(jobs) ? jobs.map((job) => job.jid) : [];
};

/** The definition as the store keeps it, read around the gateway. */
async function stored(prefix: string, jid: string): Promise<Record<string, unknown> | undefined> {
  if (prefix === "pg") return pg(`${table}_sy_recurring`).where({ id: jid }).first();
  if (prefix === "glide") {
    const redis = new Redis(redisUrl);
    try {
      const hash = await redis.hgetall(`glide:sy:recurring:{${jid}}`);
      return hash.queue === undefined ? undefined : { ...hash, count: Number(hash.count), priority: Number(hash.priority) };
    } finally {
      redis.disconnect();
    }
  }
  if (prefix === "mongo") {
    const mongo = await new MongoClient(serviceUrl("mongo")).connect();
    try {
      return (
        (await mongo
          .db(mongoDatabase)
          .collection("cloudq.recurring")
          .findOne({ _id: jid as never })) ?? undefined
      );
    } finally {
      await mongo.close();
    }
  }
  return undefined;
}

describe.each([
  { name: "SQLite", prefix: "lite" },
  { name: "PostgreSQL", prefix: "pg" },
  { name: "MongoDB-compatible (Cloudq)", prefix: "mongo" },
  { name: "glide-mq (Valkey/Redis)", prefix: "glide" },
])("qless recurring jobs through the RESP door onto $name", ({ prefix }) => {
  const names = () => {
    const id = randomUUID().slice(0, 8);
    return { queue: `${prefix}-recur-${id}`, jid: `r-${id}` };
  };
  const now = Math.floor(Date.now() / 1000);

  // glide-mq's jobs have no tags: there a recurring job with tags is refused when it is made.
  const tags = prefix === "glide" ? [] : ["ops"];

  it("recur keeps the definition in the store; pops add each due instance, put when it was due, with the definition's fields", async () => {
    const { queue, jid } = names();
    expect(
      await qless(
        "recur",
        now,
        queue,
        jid,
        "Digest",
        '{"to": "ops"}',
        "interval",
        60,
        0,
        "priority",
        3,
        "tags",
        JSON.stringify(tags),
        "retries",
        1,
      ),
    ).toBe(jid);
    if (prefix !== "lite") expect(await stored(prefix, jid)).toMatchObject({ queue, name: "Digest", count: 0, priority: 3 });
    expect(JSON.parse((await qless("recur.get", now, jid)) as string)).toMatchObject({
      queue,
      count: 0,
      interval: 60,
      data: '{"to": "ops"}',
    });
    expect(jidsOf(await qless("pop", now + 59, queue, "w", 10))).toEqual([`${jid}-1`]);
    expect(jidsOf(await qless("pop", now + 59, queue, "w", 10))).toEqual([]);
    const [second] = JSON.parse((await qless("pop", now + 61, queue, "w", 10)) as string);
    expect(second).toMatchObject({
      jid: `${jid}-2`,
      spawned_from_jid: jid,
      klass: "Digest",
      priority: 3,
      retries: 1,
      tags: tags.length > 0 ? tags : {},
    });
    expect(second.history[0]).toEqual({ when: now + 60, q: queue, what: "put" });
    if (prefix !== "lite") expect(await stored(prefix, jid)).toMatchObject({ count: 2 });
    expect(await qless("unrecur", now, jid)).toBe(1);
    expect(await qless("recur.get", now, jid)).toBeNull();
    expect(jidsOf(await qless("pop", now + 600, queue, "w", 10))).toEqual([]);
  });

  it("backlog bounds the instances a late pop adds; recur.update moves the next run by the change of interval", async () => {
    const { queue, jid } = names();
    await qless("recur", now, queue, jid, "K", "{}", "interval", 60, 0, "backlog", 2);
    // Nearly ten intervals late, with a backlog of two: the two latest, as qless skips the older ones.
    expect(jidsOf(await qless("pop", now + 590, queue, "w", 10))).toEqual([`${jid}-1`, `${jid}-2`]);
    expect(await qless("recur.update", now + 590, jid, "interval", 30)).toBe(1);
    // The next run was now + 600; 30 seconds sooner, it is due already, and the one after at now + 600.
    expect(jidsOf(await qless("pop", now + 590, queue, "w", 10))).toEqual([`${jid}-3`]);
    expect(jidsOf(await qless("pop", now + 599, queue, "w", 10))).toEqual([]);
    expect(jidsOf(await qless("pop", now + 600, queue, "w", 10))).toEqual([`${jid}-4`]);
  });

  it("two gateways popping the same store at once add each due instance once, and hand each out once", async () => {
    const { queue, jid } = names();
    await qless("recur", now, queue, jid, "K", "{}", "interval", 1, 0);
    const popped: string[] = [];
    for (let round = 1; round <= 5; round++) {
      const at = now + round * 10;
      const replies = await Promise.all(clients.map((client) => qlessOn(client, "pop", at, queue, "w", 4)));
      popped.push(...replies.flatMap(jidsOf));
    }
    // A peek adds the instances still due as well (qless's peek does); then the count names them all.
    const waiting = jidsOf(await qless("peek", now + 50, queue, 100));
    const count = JSON.parse((await qless("recur.get", now, jid)) as string).count as number;
    expect(count).toBe(51);
    // Every instance the count names exists once: handed out, or still waiting; none twice.
    expect(new Set(popped).size).toBe(popped.length);
    expect([...popped, ...waiting].sort()).toEqual(Array.from({ length: count }, (_, i) => `${jid}-${i + 1}`).sort());
    expect(popped.length).toBeGreaterThan(0);
  });
});

describe("qless recurring jobs through the RESP door onto glide-mq, whose jobs have no tags", () => {
  it("a recurring job with tags is refused (501), as its instances could not be jobs there, and nothing is kept", async () => {
    const [queue, jid] = [`glide-recur-${randomUUID().slice(0, 8)}`, `r-${randomUUID().slice(0, 8)}`];
    const now = Math.floor(Date.now() / 1000);
    const tagged = qless("recur", now, queue, jid, "K", "{}", "interval", 60, 0, "tags", '["ops"]');
    await expect(tagged).rejects.toThrow(/UNSUPPORTED.*no tags/);
    expect(await qless("recur.get", now, jid)).toBeNull();
    expect(await qless("recur", now, queue, jid, "K", "{}", "interval", 60, 0)).toBe(jid);
    await expect(qless("recur.tag", now, jid, "ops")).rejects.toThrow(/UNSUPPORTED.*no tags/);
    expect(JSON.parse((await qless("recur.get", now, jid)) as string)).toMatchObject({ tags: {} });
  });
});
