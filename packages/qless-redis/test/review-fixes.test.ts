import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type QlessBackend, createQlessBackend } from "../src/index.js";
import { type PrivateRedis, startPrivateRedis } from "./helpers/private-redis.js";

// Rules found in review. A private server rather than the conformance suite's database 1: that
// suite empties database 1 when it starts, which would race with these tests in parallel files.
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
  it("export() pages by the last jid: canceling a job of an earlier page skips no other job", async () => {
    const queue = `export-${rnd()}`;
    const ids = ["a1", "b2", "c3", "d4"].map((id) => `${id}-${queue}`);
    for (const id of ids) await backend.enqueue(queue, { name: "x", data: {}, id });
    const first = await backend.export(queue, { limit: 2 });
    expect(first.items.map((job) => job.id)).toEqual(ids.slice(0, 2));
    await backend.cancel(queue, ids[0] as string);
    const seen = first.items.map((job) => job.id);
    let cursor = first.cursor;
    while (cursor) {
      const next = await backend.export(queue, { limit: 2, cursor });
      seen.push(...next.items.map((job) => job.id));
      cursor = next.cursor;
    }
    expect(seen).toEqual(ids);
  });

  it("export() cursors are opaque and a forged one is a ValidationError", async () => {
    const queue = `export-${rnd()}`;
    await backend.enqueue(queue, { name: "x", data: {}, id: `a-${queue}` });
    await backend.enqueue(queue, { name: "x", data: {}, id: `b-${queue}` });
    const first = await backend.export(queue, { limit: 1 });
    expect(first.cursor).not.toContain(`a-${queue}`);
    await expect(backend.export(queue, { limit: 1, cursor: "not-a-cursor" })).rejects.toMatchObject({ code: "VALIDATION" });
  });
});
