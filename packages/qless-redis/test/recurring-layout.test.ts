import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type QlessBackend, createQlessBackend } from "../src/index.js";
import { type PrivateRedis, startPrivateRedis } from "./helpers/private-redis.js";

// RecurringJobs writes and reads ql:r:<jid> and ql:q:<queue>-recur exactly as qless's own `recur`
// does, so a definition a migration carries in is one qless workers' pops spawn from.
let server: PrivateRedis;
let redis: Redis;
let backend: QlessBackend;
const unique = () => Math.random().toString(36).slice(2, 10);

beforeAll(async () => {
  server = await startPrivateRedis();
  redis = server.connect();
  backend = createQlessBackend({ redis });
  await backend.ready();
});

afterAll(async () => {
  await backend?.close();
  await server?.stop();
});

describe("qless-redis RecurringJobs in qless's own recurring layout", () => {
  it("putRecurrence writes the hash and score qless's recur writes; recurrence() reads one recur wrote", async () => {
    const [queue, byRecur, byPut] = [`q-${unique()}`, `r-${unique()}`, `p-${unique()}`];
    const now = 1_700_000_000;
    const data = '{"to": ["ops"], "url": "a/b"}';
    await backend.qless(
      "recur",
      now,
      queue,
      byRecur,
      "Report",
      data,
      "interval",
      0.7,
      30,
      "priority",
      5,
      "tags",
      '["a/b","x"]',
      "retries",
      2,
      "backlog",
      3,
    );
    const read = await backend.recurrence(byRecur);
    expect(read).toEqual({
      id: byRecur,
      queue,
      name: "Report",
      data: { to: ["ops"], url: "a/b" },
      priority: 5,
      tags: ["a/b", "x"],
      maxAttempts: 3,
      intervalMs: 700,
      nextAt: (now + 30) * 1000,
      count: 0,
      backlog: 3,
      native: { qless: { data } },
    });
    await backend.putRecurrence({ ...read!, id: byPut });
    const { jid: _a, ...recurHash } = await redis.hgetall(`ql:r:${byRecur}`);
    const { jid: putJid, ...putHash } = await redis.hgetall(`ql:r:${byPut}`);
    expect(putJid).toBe(byPut);
    expect(putHash).toEqual(recurHash);
    expect(await redis.zscore(`ql:q:${queue}-recur`, byPut)).toBe(await redis.zscore(`ql:q:${queue}-recur`, byRecur));
    // qless's own pop spawns from the written definition: <jid>-1, with its data as spelled.
    const [spawned] = JSON.parse((await backend.qless("pop", now + 31, queue, "w", 5)) as string).filter((job: { jid: string }) =>
      job.jid.startsWith(byPut),
    );
    expect(spawned).toMatchObject({ jid: `${byPut}-1`, spawned_from_jid: byPut, data, priority: 5, retries: 2 });
  });

  it("removeRecurrence is unrecur; advanceRecurrence moves count and score only from the count seen", async () => {
    const [queue, jid] = [`q-${unique()}`, `r-${unique()}`];
    await backend.qless("recur", 1_700_000_000, queue, jid, "K", "{}", "interval", 60, 0);
    expect(await backend.advanceRecurrence(jid, 1, 2, 1_700_000_120_000)).toBe(false);
    expect(await backend.advanceRecurrence(jid, 0, 2, 1_700_000_120_000)).toBe(true);
    expect(await redis.hget(`ql:r:${jid}`, "count")).toBe("2");
    expect(await redis.zscore(`ql:q:${queue}-recur`, jid)).toBe("1700000120");
    expect((await backend.recurrences(queue)).map((r) => r.id)).toEqual([jid]);
    expect(await backend.removeRecurrence(jid)).toBe(true);
    expect(await redis.exists(`ql:r:${jid}`)).toBe(0);
    expect(await redis.zcard(`ql:q:${queue}-recur`)).toBe(0);
    expect(await backend.removeRecurrence(jid)).toBe(false);
  });
});
