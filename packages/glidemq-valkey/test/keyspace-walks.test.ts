import { randomUUID } from "node:crypto";
import { hasJobLookup } from "@switchyard/core";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { GlideProducer, createGlideMqBackend, queueKeys } from "../src/index.js";
import { COST_SHARE, FRESH_MS } from "../src/keyspace-walk.js";
import { queueNames } from "../src/listing.js";
import { QueueDirectory } from "../src/queue-directory.js";
import { removeQueues } from "./support/cleanup.js";

/**
 * What one backend's readers find by walking the keyspace (keyspace-walk.ts): glide-mq keeps no list
 * of its queues nor of its flow parents. Probed by counting the SCANs Redis receives (under a key
 * prefix of the test's own) and the walks a directory makes on a clock the test moves.
 */
const url = `${serviceUrl("redis")}/4`;
let redis: Redis;
const used = new Set<string>();
const queue = (tag: string) => {
  const name = `directory-${tag}-${randomUUID().slice(0, 8)}`;
  used.add(name);
  return name;
};

beforeAll(() => {
  redis = new Redis(url);
});
afterAll(async () => {
  await removeQueues(redis, used);
  await redis.quit();
});

/** A directory over this Redis whose clock the test sets, and how many walks it has made. */
function directoryOnClock(walkTakesMs = 0) {
  const state = { now: 1_000_000, walks: 0 };
  const directory = new QueueDirectory(
    async () => {
      state.walks++;
      const names = await queueNames(redis, "glide");
      state.now += walkTakesMs;
      return names;
    },
    () => state.now,
  );
  return { directory, state };
}

describe("glidemq-valkey: queueNames", () => {
  it("names a queue by any of its queue-level keys, and not by job hashes alone", async () => {
    const suffixes = ["id", "events", "meta", "stream", "scheduled", "completed", "failed"] as const;
    const named = suffixes.map((suffix) => [queue(suffix), suffix] as const);
    for (const [name, suffix] of named) await redis.set(`glide:{${name}}:${suffix}`, "1");
    const jobsOnly = queue("jobs-only");
    await redis.hset(queueKeys(jobsOnly).job("1"), "name", "orphan");
    const names = await queueNames(redis, "glide");
    for (const [name] of named) expect(names).toContain(name);
    expect(names).not.toContain(jobsOnly);
  });
});

describe("glidemq-valkey: QueueDirectory", () => {
  it("one walk serves every reader until FRESH_MS have passed; readers during a walk share it", async () => {
    const { directory, state } = directoryOnClock();
    const made = queue("fresh");
    await redis.set(queueKeys(made).id, "1");
    const answers = await Promise.all(Array.from({ length: 5 }, () => directory.names()));
    expect(state.walks).toBe(1);
    for (const names of answers) expect(names).toContain(made);
    const later = queue("later");
    await redis.set(queueKeys(later).id, "1");
    state.now += FRESH_MS - 1;
    expect(await directory.names()).not.toContain(later);
    expect(state.walks).toBe(1);
    state.now += 2;
    expect(await directory.names()).toContain(later);
    expect(state.walks).toBe(2);
  });

  it("a slow walk's names serve COST_SHARE times as long as it took, so walks take at most 1/COST_SHARE of the time", async () => {
    const tookMs = 1_000;
    const { directory, state } = directoryOnClock(tookMs);
    await directory.names();
    const started = state.now - tookMs;
    state.now = started + tookMs + COST_SHARE * tookMs - 1;
    await directory.names();
    expect(state.walks).toBe(1);
    state.now += 2;
    await directory.names();
    expect(state.walks).toBe(2);
  });

  it("names a queue written to at once, and after the next walk only if the walk found it", async () => {
    const { directory, state } = directoryOnClock();
    await directory.names();
    const [kept, gone] = [queue("kept"), queue("gone")];
    state.now += 1;
    directory.wrote(kept);
    directory.wrote(gone);
    await redis.set(queueKeys(kept).id, "1");
    expect(await directory.names()).toEqual(expect.arrayContaining([kept, gone]));
    expect(state.walks).toBe(1);
    state.now += FRESH_MS + 1;
    const afterWalk = await directory.names();
    expect(state.walks).toBe(2);
    expect(afterWalk).toContain(kept);
    expect(afterWalk).not.toContain(gone);
  });

  it("queues(), the jid look-ups and the event feed of a backend share its walks", async () => {
    // A prefix of this test's own: the SCANs counted are its backend's walks, whatever else runs on the server.
    const prefix = `directory${randomUUID().slice(0, 8)}`;
    const backend = createGlideMqBackend({ url, prefix });
    const elsewhere = createGlideMqBackend({ url, prefix });
    await Promise.all([backend.ready(), elsewhere.ready()]);
    const [before, mine, theirs] = ["before", "mine", "theirs"];
    const monitor = await redis.monitor();
    let scans = 0;
    monitor.on("monitor", (_time: string, args: string[]) => {
      if (/^scan$/i.test(args[0] ?? "") && args.some((arg) => arg.startsWith(`${prefix}:`))) scans++;
    });
    let watch: { close(): Promise<void> } | undefined;
    try {
      await elsewhere.enqueue(before, { name: "made elsewhere" });
      expect(await backend.queues()).toContain(before);
      const walkScans = scans;
      expect(walkScans).toBeGreaterThan(0);
      // The feed looks for queues at its first read: in the names of that walk.
      watch = backend.watchEvents(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await backend.enqueue(mine, { name: "made here" });
      await elsewhere.enqueue(theirs, { name: "made elsewhere, after the walk" });
      if (!hasJobLookup(backend)) throw new Error("no JobLookup");
      const [listed] = await Promise.all([backend.queues(), backend.queues(), backend.queuesHolding("no-such-jid")]);
      // What this backend wrote is named at once; what another process made waits for the next walk.
      expect(listed).toContain(mine);
      expect(listed).not.toContain(theirs);
      expect(scans).toBe(walkScans);
    } finally {
      await monitor.disconnect();
      await watch?.close();
      await Promise.all([backend.close(), elsewhere.close()]);
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.unlink(...keys);
    }
  });
});

describe("glidemq-valkey: flow parents", () => {
  it("a queue's first count finds glide-mq's flow parents by its own walk; later counts of every queue share one", async () => {
    const prefix = `parents${randomUUID().slice(0, 8)}`;
    const backend = createGlideMqBackend({ url, prefix });
    await backend.ready();
    const queues = ["a", "b", "c"];
    for (const name of queues) await new GlideProducer(redis, name, { prefix }).addFlow({ name: "p", children: [{ name: "c" }] });
    const monitor = await redis.monitor();
    const walks: string[] = [];
    monitor.on("monitor", (_time: string, args: string[]) => {
      const match = args.find((arg) => arg.startsWith(`${prefix}:`));
      if (/^scan$/i.test(args[0] ?? "") && match && args[1] === "0") walks.push(match);
    });
    try {
      for (const name of queues) expect(await backend.counts(name)).toMatchObject({ blocked: 1, waiting: 1 });
      expect(walks).toEqual(queues.map((name) => `${prefix}:{${name}}:deps:*`));
      for (let round = 0; round < 3; round++) for (const name of queues) expect((await backend.counts(name)).blocked).toBe(1);
      expect(walks.slice(queues.length)).toEqual([`${prefix}:{*}:deps:*`]);
    } finally {
      await monitor.disconnect();
      await backend.close();
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.unlink(...keys);
    }
  });
});
