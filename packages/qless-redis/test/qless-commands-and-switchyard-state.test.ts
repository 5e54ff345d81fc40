import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type QlessBackend, createQlessBackend } from "../src/index.js";
import { type PrivateRedis, startPrivateRedis } from "./helpers/private-redis.js";

// How Switchyard's own state (unique keys, cursors, batches) meets qless's global jids and qless's
// own commands. The contract's generic rules are in @switchyard/conformance. A private server
// rather than the conformance suite's database 1, which that suite empties when it starts.
let server: PrivateRedis;
let redis: Redis;
let backend: QlessBackend;
const rnd = () => randomBytes(4).toString("hex");
const now = () => Date.now() / 1000;

beforeAll(async () => {
  server = await startPrivateRedis();
  redis = server.connect();
  backend = createQlessBackend({ redis });
  await backend.ready();
});

afterAll(async () => {
  await backend?.close();
  redis?.disconnect();
  await server?.stop();
});

describe("qless-redis export paging", () => {
  it("export() cursors do not show the jid they resume after, and a forged one is a ValidationError", async () => {
    const queue = `export-${rnd()}`;
    await backend.enqueue(queue, { name: "x", data: {}, id: `a-${queue}` });
    await backend.enqueue(queue, { name: "x", data: {}, id: `b-${queue}` });
    const first = await backend.export(queue, { limit: 1 });
    expect(first.cursor).not.toContain(`a-${queue}`);
    await expect(backend.export(queue, { limit: 1, cursor: "not-a-cursor" })).rejects.toMatchObject({ code: "VALIDATION" });
  });
});

describe("qless-redis enqueueBulk", () => {
  it("enqueueBulk is all-or-nothing: a jid taken in another queue fails the batch and writes none of it", async () => {
    const [other, queue] = [`bulk-${rnd()}`, `bulk-${rnd()}`];
    const [taken, fresh] = [`taken-${rnd()}`, `fresh-${rnd()}`];
    await backend.enqueue(other, { name: "x", data: 1, id: taken });
    await expect(
      backend.enqueueBulk(queue, [
        { name: "first", data: 1, id: fresh, uniqueKey: `k-${fresh}` },
        { name: "second", data: 2, id: taken },
      ]),
    ).rejects.toMatchObject({ code: "CONFLICT" });
    expect(await backend.get(queue, fresh)).toBeNull();
    expect(await redis.exists(`ql:j:${fresh}`, `ql:j:${fresh}-history`)).toBe(0);
    expect(await redis.zcard(`ql:q:${queue}-work`)).toBe(0);
    expect(await redis.exists(`ql:sy:unique:${queue}`)).toBe(0);
    expect((await backend.get(other, taken))?.queue).toBe(other);
  });
});

describe("qless-redis unique keys", () => {
  it("a unique key whose job a qless worker advanced to another queue (complete ... next) is free again", async () => {
    const [a, b] = [`uq-${rnd()}`, `uq-${rnd()}`];
    const key = `k-${rnd()}`;
    const { job } = await backend.enqueue(a, { name: "x", data: {}, uniqueKey: key });
    await backend.reserve(a, { worker: "qless-worker" });
    expect(await backend.qless("complete", now(), job.id, "qless-worker", a, "{}", "next", b)).toBe("waiting");
    expect(await redis.hexists(`ql:sy:unique:${a}`, key)).toBe(0);
    const again = await backend.enqueue(a, { name: "x", data: {}, uniqueKey: key });
    expect(again.created).toBe(true);
    expect(again.job.id).not.toBe(job.id);
    expect(await redis.hget(`ql:sy:unique:${a}`, key)).toBe(again.job.id);
  });

  it("a stale entry (its job is no longer in the queue) does not hold the key: the next job replaces it", async () => {
    const [a, b] = [`uq-${rnd()}`, `uq-${rnd()}`];
    const key = `k-${rnd()}`;
    const { job } = await backend.enqueue(b, { name: "x", data: {} });
    // An entry left behind by an older version, naming a job that lives in another queue.
    await redis.hset(`ql:sy:unique:${a}`, key, job.id);
    const fresh = await backend.enqueue(a, { name: "x", data: {}, uniqueKey: key });
    expect(fresh.created).toBe(true);
    expect(fresh.job.queue).toBe(a);
    expect(await redis.hget(`ql:sy:unique:${a}`, key)).toBe(fresh.job.id);
  });

  it("qless's put of the job into another queue frees its unique key in the old one", async () => {
    const [a, b] = [`uq-${rnd()}`, `uq-${rnd()}`];
    const key = `k-${rnd()}`;
    const { job } = await backend.enqueue(a, { name: "x", data: {}, uniqueKey: key });
    await backend.qless("put", now(), "", b, job.id, "x", "{}", 0);
    expect(await redis.hexists(`ql:sy:unique:${a}`, key)).toBe(0);
    expect((await backend.enqueue(a, { name: "x", data: {}, uniqueKey: key })).created).toBe(true);
  });

  it("cancel() and qless's cancel free the job's unique key in ql:sy:unique:<queue>", async () => {
    const queue = `uq-${rnd()}`;
    const [k1, k2] = [`k1-${rnd()}`, `k2-${rnd()}`];
    const first = await backend.enqueue(queue, { name: "x", data: {}, uniqueKey: k1 });
    const second = await backend.enqueue(queue, { name: "x", data: {}, uniqueKey: k2 });
    await backend.cancel(queue, first.job.id);
    await backend.qless("cancel", now(), second.job.id);
    expect(await redis.exists(`ql:sy:unique:${queue}`)).toBe(0);
    expect((await backend.enqueue(queue, { name: "x", data: {}, uniqueKey: k1 })).created).toBe(true);
  });

  it("a completed job that qless prunes (jobs-history-count) frees its unique key", async () => {
    const queue = `uq-${rnd()}`;
    const key = `k-${rnd()}`;
    const { job } = await backend.enqueue(queue, { name: "x", data: {}, uniqueKey: key });
    await backend.reserve(queue, { worker: "w" });
    await backend.qless("config.set", now(), "jobs-history-count", 0);
    try {
      await backend.complete(queue, job.id, { worker: "w" });
    } finally {
      await backend.qless("config.unset", now(), "jobs-history-count");
    }
    expect(await redis.exists(`ql:j:${job.id}`)).toBe(0);
    expect(await redis.hexists(`ql:sy:unique:${queue}`, key)).toBe(0);
  });

  it("a completed job qless keeps lets its key go: the next enqueue with it creates a job and takes the entry", async () => {
    const queue = `uq-${rnd()}`;
    const key = `k-${rnd()}`;
    const { job } = await backend.enqueue(queue, { name: "x", data: {}, uniqueKey: key });
    await backend.reserve(queue, { worker: "w" });
    await backend.complete(queue, job.id, { worker: "w" });
    const again = await backend.enqueue(queue, { name: "x", data: {}, uniqueKey: key });
    expect([again.created, again.job.state]).toEqual([true, "waiting"]);
    expect(await redis.hget(`ql:sy:unique:${queue}`, key)).toBe(again.job.id);
    expect((await backend.get(queue, job.id))?.state).toBe("completed");
  });
});

describe("qless-redis cancel", () => {
  it("qless's own cancel command still deletes a failed job, as qless-core does", async () => {
    const queue = `cancel-${rnd()}`;
    const { job } = await backend.enqueue(queue, { name: "x", data: {}, maxAttempts: 1 });
    await backend.reserve(queue, { worker: "w" });
    await backend.fail(queue, job.id, { worker: "w", error: { message: "boom" }, retry: false });
    await backend.qless("cancel", now(), job.id);
    expect(await redis.exists(`ql:j:${job.id}`)).toBe(0);
  });
});
