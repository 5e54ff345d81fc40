import type { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCloudqBackend } from "../src/index.js";
import { mongoUrl, rawClient, rawFilter, testDatabase } from "./helpers.js";

/**
 * The `clock` option is the time the documents record and the time reserve and the state reads
 * decide by (a qless client's `now` through the gateway); no update takes the server's time.
 */
const T0 = 1_000_000_000_000;
const database = testDatabase("clock");
let client: MongoClient;
const jobs = () => client.db(database).collection("cloudq.jobs");
const queue = () => `clock-${Math.random().toString(36).slice(2, 10)}`;

beforeAll(async () => {
  client = await rawClient();
});
afterAll(async () => {
  await client.db(database).dropDatabase();
  await client.close();
});

describe("cloudq-mongo: the clock option", () => {
  it("documents carry the clock's times, and a delay and a lease run out by it", async () => {
    let now = T0;
    const backend = createCloudqBackend({ url: mongoUrl(), database, completion: "mark-deleted", clock: () => now });
    try {
      const q = queue();
      const { job } = await backend.enqueue(q, { name: "Clocked", data: [1], delay: 10_000 });
      expect(job).toMatchObject({ state: "delayed", createdAt: T0, runAt: T0 + 10_000 });
      const stored = await jobs().findOne(rawFilter(q, job.id));
      expect(stored?.inserted_at).toEqual(new Date(T0));
      expect(stored?.switchyard?.runAt).toBe(T0 + 10_000);

      now = T0 + 5_000;
      expect(await backend.reserve(q, { worker: "a" })).toEqual([]);
      expect((await backend.counts(q)).delayed).toBe(1);
      now = T0 + 10_000;
      const [taken] = await backend.reserve(q, { worker: "a", leaseMs: 30_000 });
      expect(taken?.lease).toEqual({ worker: "a", expiresAt: T0 + 40_000 });
      const reserved = await jobs().findOne(rawFilter(q, job.id));
      expect(reserved?.updated_at).toEqual(new Date(T0 + 10_000));
      expect(reserved?.switchyard).toMatchObject({ startedAt: T0 + 10_000, lease: { worker: "a", expiresAt: T0 + 40_000 } });

      // The lease runs out by the clock, not by the real time (long past T0).
      now = T0 + 39_999;
      expect(await backend.reserve(q, { worker: "b" })).toEqual([]);
      now = T0 + 40_001;
      const [again] = await backend.reserve(q, { worker: "b", leaseMs: 30_000 });
      expect(again).toMatchObject({ id: job.id, attempts: 2, lease: { worker: "b", expiresAt: T0 + 70_001 } });

      now = T0 + 50_000;
      expect((await backend.heartbeat(q, job.id, { worker: "b", leaseMs: 30_000 })).lease?.expiresAt).toBe(T0 + 80_000);
      expect((await jobs().findOne(rawFilter(q, job.id)))?.switchyard?.lease?.expiresAt).toBe(T0 + 80_000);
      now = T0 + 60_000;
      expect((await backend.complete(q, job.id, { worker: "b" })).finishedAt).toBe(T0 + 60_000);
      const done = await jobs().findOne(rawFilter(q, job.id));
      expect(done?.updated_at).toEqual(new Date(T0 + 60_000));
      expect(done?.switchyard?.finishedAt).toBe(T0 + 60_000);
    } finally {
      await backend.close();
    }
  });

  it("a retry's delay counts from the clock", async () => {
    let now = T0;
    const backend = createCloudqBackend({ url: mongoUrl(), database, clock: () => now });
    try {
      const q = queue();
      const { job } = await backend.enqueue(q, { name: "Flaky", data: [], maxAttempts: 3 });
      await backend.reserve(q, { worker: "w" });
      now = T0 + 1_000;
      await backend.fail(q, job.id, { worker: "w", error: { message: "later" }, retryDelay: 5_000 });
      expect((await jobs().findOne(rawFilter(q, job.id)))?.switchyard?.runAt).toBe(T0 + 6_000);
      now = T0 + 5_999;
      expect(await backend.reserve(q, { worker: "w" })).toEqual([]);
      now = T0 + 6_000;
      expect(await backend.reserve(q, { worker: "w" })).toHaveLength(1);
    } finally {
      await backend.close();
    }
  });
});
