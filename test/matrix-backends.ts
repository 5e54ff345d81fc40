import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cloudqProbe } from "@switchyard/cloudq-mongo/testing";
import type { Backend, JobState } from "@switchyard/core";
import { ADAPTERS } from "@switchyard/gateway";
import { glideProbe } from "@switchyard/glidemq-valkey/testing";
import { qlessProbe, queueOf as qlessQueueOf } from "@switchyard/qless-redis/testing";
import { workerQueueProbe } from "@switchyard/workerqueue-sql/testing";
import { Cluster, Redis } from "ioredis";
import knexFactory, { type Knex } from "knex";
import { MongoClient } from "mongodb";
import { serviceUrl } from "./support/services.js";

/**
 * Every store the gateway can route to, as the cross-package suites open them: a backend spec for the
 * gateway config, and probes that read the native store directly (a SQL select, a Redis HGET, a Mongo
 * findOne), never through the adapter.
 */
export type StoreName = "sqlite" | "postgres" | "mysql" | "qless" | "glidemq" | "glidemq-cluster" | "cloudq";

export const SQL_STORES: StoreName[] = ["sqlite", "postgres", "mysql"];

export interface BackendSpecInput {
  type: "workerqueue-sql" | "qless-redis" | "glidemq-valkey" | "cloudq-mongo";
  url: string;
  options: Record<string, unknown>;
}

export interface StoreUnderTest {
  name: StoreName;
  spec: BackendSpecInput;
  /** The job's state string in the native record, or null when there is no record. */
  nativeState(queue: string, id: string): Promise<string | null>;
  /** Native job records of the queue, in every state. */
  countJobs(queue: string): Promise<number>;
  /**
   * The finest createdAt the store keeps, in ms: qless reads it from the first `put` of the job's
   * history, which qless writes in whole seconds (documented in the qless-redis README).
   */
  createdAtResolutionMs: number;
  /**
   * What the adapter's import loses (none today; a gap found later is listed here and reported to
   * the lead). `uniqueKey`: the job arrives without it; `uniqueKeyDedup`: the key is kept on the
   * job but a producer's retry with it creates a second job; `tags`: the job arrives untagged.
   */
  importDrops: Array<"uniqueKey" | "uniqueKeyDedup" | "tags">;
  /** The native strings each core state is stored as (null: the record is removed). */
  nativeStates: Partial<Record<JobState, Array<string | null>>>;
  /** Marks a queue a test uses, so dispose() removes its records from a shared server; returns it. */
  track(queue: string): string;
  /** An adapter on this store, built by the gateway's own registry and made ready. */
  openBackend(): Promise<Backend>;
  /** Drops what the store holds for this suite and closes the probe connection. */
  dispose(): Promise<void>;
}

const randomSuffix = () => randomBytes(4).toString("hex");

async function openWithRegistry(spec: BackendSpecInput): Promise<Backend> {
  const adapter = ADAPTERS.find((candidate) => candidate.type === spec.type);
  if (!adapter) throw new Error(`the gateway has no ${spec.type} adapter`);
  const backend = await adapter.create(adapter.optionsSchema.parse({ ...spec.options, url: spec.url }));
  await backend.ready();
  return backend;
}

function sqlStore(name: "sqlite" | "postgres" | "mysql"): StoreUnderTest {
  const dir = name === "sqlite" ? mkdtempSync(join(tmpdir(), "switchyard-matrix-")) : undefined;
  const url = name === "sqlite" ? `sqlite:${join(dir!, "jobs.sqlite")}` : serviceUrl(name);
  const table = `matrix_${randomSuffix()}`;
  const spec: BackendSpecInput = { type: "workerqueue-sql", url, options: { table } };
  let knex: Knex | undefined;
  const db = () => {
    knex ??= dir
      ? knexFactory({ client: "better-sqlite3", connection: { filename: url.slice("sqlite:".length) }, useNullAsDefault: true })
      : knexFactory({ client: name === "postgres" ? "pg" : "mysql2", connection: url, pool: { min: 0, max: 2 } });
    return knex;
  };
  const probe = () => workerQueueProbe(db(), table, name);
  return {
    name,
    spec,
    nativeState: (queue, id) => probe().nativeState(queue, id),
    countJobs: (queue) => probe().countJobs(queue),
    createdAtResolutionMs: 1,
    importDrops: [],
    nativeStates: {
      waiting: ["pending"],
      delayed: ["pending"],
      active: ["loading", "processing"],
      completed: ["complete"],
      failed: ["error"],
      canceled: ["error"],
      blocked: ["pending"],
    },
    track: (queue) => queue, // the table is dropped whole
    openBackend: () => openWithRegistry(spec),
    async dispose() {
      await db().schema.dropTableIfExists(table);
      await db().schema.dropTableIfExists(`${table}_paused_queues`);
      await db().schema.dropTableIfExists(`${table}_sy_recurring`);
      await db().destroy();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Redis URL of one logical database; the gateway suites own databases 7 to 9. */
export function redisUrl(db: number): string {
  return `${serviceUrl("redis").replace(/\/\d*$/, "")}/${db}`;
}

function qlessStore(db: number): StoreUnderTest {
  const url = redisUrl(db);
  const redis = new Redis(url);
  /** Every queue a probe was asked about; dispose() deletes their keys, so runs do not pile up in Redis. */
  const seen = new Set<string>();
  const jobsOf = async (queue: string): Promise<string[]> => {
    seen.add(queue);
    const jids = (await redis.keys("ql:j:*")).filter((key) => !/-(history|dependencies|dependents)$/.test(key)).map((key) => key.slice(5));
    const owned: string[] = [];
    for (const jid of jids) if ((await qlessQueueOf(redis, jid)) === queue) owned.push(jid);
    return owned;
  };
  return {
    name: "qless",
    spec: { type: "qless-redis", url, options: {} },
    nativeState: (queue, id) => {
      seen.add(queue);
      return qlessProbe(redis).nativeState(queue, id);
    },
    countJobs: async (queue) => (await jobsOf(queue)).length,
    createdAtResolutionMs: 1000,
    importDrops: [],
    nativeStates: {
      waiting: ["waiting"],
      delayed: ["scheduled"],
      active: ["running"],
      completed: ["complete"],
      failed: ["failed"],
      blocked: ["depends"],
    },
    track: (queue) => {
      seen.add(queue);
      return queue;
    },
    openBackend: () => openWithRegistry({ type: "qless-redis", url, options: {} }),
    async dispose() {
      for (const queue of seen) {
        const jobKeys = (await jobsOf(queue)).flatMap((jid) => [
          `ql:j:${jid}`,
          ...["history", "dependents", "dependencies"].map((s) => `ql:j:${jid}-${s}`),
        ]);
        // Queue sets, stats bins, the default failure group and unique-key slots.
        const patterns = [`ql:q:${queue}*`, `ql:s:*:${queue}`, `ql:f:${queue}-*`, `ql:sy:unique:${queue}*`];
        const queueKeys = (await Promise.all(patterns.map((pattern) => redis.keys(pattern)))).flat();
        if (jobKeys.length + queueKeys.length > 0) await redis.del(...jobKeys, ...queueKeys);
        await redis.zrem("ql:queues", queue);
      }
      redis.disconnect();
    },
  };
}

/**
 * glide-mq on standalone Redis (a logical database) or on the 3-primary cluster (`cluster: true`,
 * database 0 only; random queue names keep suites apart). Every key of a queue shares the `{queue}`
 * hash tag, so the probe reads a job hash on whichever primary holds the slot, and scans all of them.
 */
function glideStore(db: number | "cluster"): StoreUnderTest {
  const seeds = db === "cluster" ? serviceUrl("redis-cluster") : undefined;
  const url = seeds ? `redis://${seeds}` : redisUrl(db as number);
  const options = seeds ? { cluster: true } : {};
  const redis = seeds
    ? new Cluster(seeds.split(",").map((node) => ({ host: node.split(":")[0]!, port: Number(node.split(":")[1]) })))
    : new Redis(url);
  const spec: BackendSpecInput = { type: "glidemq-valkey", url, options };
  /** Every queue a probe was asked about; dispose() deletes their keys, so runs do not pile up in Redis. */
  const seen = new Set<string>();
  const keysOf = async (pattern: string): Promise<string[]> => {
    seen.add(/^glide:\{([^}]*)\}/.exec(pattern)![1]!);
    const found: string[] = [];
    for (const node of redis instanceof Cluster ? redis.nodes("master") : [redis]) {
      let cursor = "0";
      do {
        const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
        cursor = next;
        found.push(...keys);
      } while (cursor !== "0");
    }
    return found;
  };
  return {
    name: seeds ? "glidemq-cluster" : "glidemq",
    spec,
    nativeState: (queue, id) => {
      seen.add(queue);
      return glideProbe(redis).nativeState(queue, id);
    },
    countJobs: (queue) => {
      seen.add(queue);
      return glideProbe(redis).countJobs(queue);
    },
    createdAtResolutionMs: 1,
    importDrops: [],
    nativeStates: {
      waiting: ["waiting", "prioritized"],
      delayed: ["delayed"],
      active: ["active"],
      completed: ["completed"],
      failed: ["failed"],
      blocked: ["waiting-children"],
    },
    track: (queue) => {
      seen.add(queue);
      return queue;
    },
    openBackend: () => openWithRegistry(spec),
    async dispose() {
      // A queue's keys share its hash tag, so one DEL per queue stays within one cluster slot.
      for (const queue of seen) {
        const keys = await keysOf(`glide:{${queue}}:*`);
        if (keys.length > 0) await redis.del(...keys);
      }
      redis.disconnect();
    },
  };
}

/** `completion: "mark-deleted"` keeps completed jobs (state `deleted`); the default `remove` deletes them. */
function cloudqStore(layout: { completion?: "remove" | "mark-deleted" }): StoreUnderTest {
  const url = serviceUrl("mongo");
  const database = `cloudq_matrix_${randomSuffix()}`;
  const client = new MongoClient(url);
  const spec: BackendSpecInput = { type: "cloudq-mongo", url, options: { database, ...layout } };
  const probe = cloudqProbe(() => client, database, "queue_state", layout.completion ?? "remove");
  return {
    name: "cloudq",
    spec,
    nativeState: (queue, id) => probe.nativeState(queue, id),
    countJobs: (queue) => probe.countJobs(queue),
    createdAtResolutionMs: 1,
    importDrops: [],
    nativeStates: {
      waiting: ["queued"],
      delayed: ["queued"],
      active: ["reserved"],
      completed: layout.completion === "mark-deleted" ? ["deleted"] : [null],
      failed: ["failed"],
      canceled: ["canceled"],
      blocked: ["blocked"],
    },
    track: (queue) => queue, // the database is dropped whole
    openBackend: () => openWithRegistry(spec),
    async dispose() {
      await client.db(database).dropDatabase();
      await client.close();
    },
  };
}

/**
 * Opens one store; Redis-based stores take the logical database the calling suite owns, Cloudq its
 * layout options.
 */
export function openStore(name: StoreName, redisDb = 7, cloudqLayout: { completion?: "remove" | "mark-deleted" } = {}): StoreUnderTest {
  if (name === "qless") return qlessStore(redisDb);
  if (name === "glidemq") return glideStore(redisDb);
  if (name === "glidemq-cluster") return glideStore("cluster");
  if (name === "cloudq") return cloudqStore(cloudqLayout);
  return sqlStore(name);
}
