import type { Backend } from "@switchyard/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spreadAfterLostRace } from "../src/candidates.js";
import { createCloudqBackend } from "../src/index.js";
import { mongoUrl, rawFilter, testDatabase, useCloudqDatabase } from "./helpers.js";

const { database, client, backend, jobs, queue } = useCloudqDatabase("documents", "doc");

describe("cloudq-mongo: keys MongoDB cannot store, at any depth", () => {
  it("data and native fields with `$` or `.` keys at any level are stored losslessly and come back as they were", async () => {
    const cases = [
      { name: "dollar-data", data: { $x: 1 } },
      { name: "where", data: { $where: 1 } },
      { name: "cloudq-args", data: [{ $bad: 1 }] },
      { name: "dotted-deep", data: { a: [{ b: { "c.d": true } }] } },
      { name: "nested-native", data: [1], native: { x: { $set: 1 }, plain: "kept" } },
    ];
    const q = queue();
    const results = await backend().enqueueBulk(q, [{ name: "ok" }, ...cases]);
    expect(results.map((result) => result.created)).toEqual([true, true, true, true, true, true]);
    for (const [index, input] of cases.entries()) {
      const id = results[index + 1]?.job.id ?? "";
      const job = await backend().get(q, id);
      expect(job).toMatchObject({ name: input.name, data: input.data, state: "waiting" });
      if (input.native) expect(job?.native).toMatchObject(input.native);
    }
    const raw = await jobs().findOne(rawFilter(q, results[1]?.job.id ?? ""));
    expect(raw).not.toHaveProperty("args");
    expect(raw?.switchyard).toMatchObject({ argsJson: JSON.stringify({ $x: 1 }) });
    const native = await jobs().findOne(rawFilter(q, results[5]?.job.id ?? ""));
    expect(native).toMatchObject({ args: [1], plain: "kept" });
    expect(native).not.toHaveProperty("x");
    const single = await backend().enqueue(q, { name: "single", data: { deep: { $inc: { n: 1 } } } });
    expect((await backend().get(q, single.job.id))?.data).toEqual({ deep: { $inc: { n: 1 } } });
    expect(await jobs().countDocuments({ queue: q })).toBe(7);
  });

  it("a reserved job with stored-as-JSON data hands the worker its data as it was enqueued", async () => {
    const q = queue();
    await backend().enqueue(q, { name: "reserve-me", data: { $x: [1, { "y.z": null }] } });
    const [job] = await backend().reserve(q, { worker: "w" });
    expect(job?.data).toEqual({ $x: [1, { "y.z": null }] });
  });
});

describe("cloudq-mongo: bulk writes are all or nothing", () => {
  // A database of its own with an extra unique index on `klass`: the server then refuses the
  // second job named "dup" midway through a batch, after it has written the jobs before it.
  const strictDatabase = testDatabase("strict");
  let strict: Backend;
  const strictJobs = () => client().db(strictDatabase).collection("cloudq.jobs");

  beforeAll(async () => {
    strict = createCloudqBackend({ url: mongoUrl(), database: strictDatabase });
    await strict.ready();
    await strictJobs().createIndex({ klass: 1 }, { unique: true, name: "test_unique_klass" });
  });
  afterAll(async () => strict.close());

  it("a plain batch the server refuses midway leaves nothing written and throws a typed error", async () => {
    const q = queue();
    const failure = await strict.enqueueBulk(q, [{ name: "first" }, { name: "dup" }, { name: "dup" }]).catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: expect.any(String) });
    expect(await strictJobs().countDocuments({ queue: q })).toBe(0);
  });

  it("a batch with unique keys the server refuses midway leaves nothing written and throws a typed error", async () => {
    const q = queue();
    const failure = await strict
      .enqueueBulk(q, [
        { name: "keyed-1", uniqueKey: "k1" },
        { name: "keyed-dup", uniqueKey: "k2" },
        { name: "keyed-dup", uniqueKey: "k3" },
      ])
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: expect.any(String) });
    expect(await strictJobs().countDocuments({ queue: q })).toBe(0);
    // The keys were released with their jobs: the same batch without the clash goes in.
    const again = await strict.enqueueBulk(q, [
      { name: "keyed-1", uniqueKey: "k1" },
      { name: "keyed-2", uniqueKey: "k2" },
    ]);
    expect(again.map((result) => result.created)).toEqual([true, true]);
  });

  it("an import the server refuses midway leaves nothing written and throws a typed error", async () => {
    const source = queue();
    await backend().enqueue(source, { name: "imp-a" });
    await backend().enqueue(source, { name: "dup-import" });
    await backend().enqueue(source, { name: "dup-import" });
    const exported = await backend().export(source);
    const q = queue();
    const failure = await strict.import(q, exported.items).catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: expect.any(String) });
    expect(await strictJobs().countDocuments({ queue: q })).toBe(0);
  });

  it("a document over MongoDB's 16 MiB limit is a ValidationError before anything of the batch is written", async () => {
    const q = queue();
    const big = "x".repeat(17 * 1024 * 1024);
    await expect(backend().enqueueBulk(q, [{ name: "small" }, { name: "big", data: big }])).rejects.toMatchObject({ code: "VALIDATION" });
    expect(await jobs().countDocuments({ queue: q })).toBe(0);
  });
});

describe("cloudq-mongo: documents whose _id is not an ObjectId", () => {
  it("a hand-inserted string or number _id is reserved, completed, listed and paged like any job", async () => {
    const q = queue();
    const now = new Date();
    await jobs().insertMany([
      { _id: "legacy-1", queue: q, klass: "Legacy", args: ["s"], queue_state: "queued", inserted_at: now },
      { _id: 42, queue: q, klass: "Numbered", args: ["n"], queue_state: "queued", inserted_at: now },
    ] as never[]);
    const { job: modern } = await backend().enqueue(q, { name: "Modern", data: [1] });
    const all = new Set(["legacy-1", "42", modern.id]);

    const exported: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await backend().export(q, { limit: 1, ...(cursor ? { cursor } : {}) });
      exported.push(...page.items.map((job) => job.id));
      cursor = page.cursor ?? undefined;
    } while (cursor);
    expect(new Set(exported)).toEqual(all);
    expect(exported).toHaveLength(3);

    expect(await backend().get(q, "legacy-1")).toMatchObject({ name: "Legacy", data: ["s"], state: "waiting" });
    const reserved = await backend().reserve(q, { worker: "w", count: 3 });
    expect(new Set(reserved.map((job) => job.id))).toEqual(all);
    await backend().complete(q, "legacy-1", { worker: "w" });
    await backend().complete(q, "42", { worker: "w" });
    expect(await jobs().countDocuments({ queue: q, _id: { $in: ["legacy-1", 42] } } as never)).toBe(0);
    expect((await backend().counts(q)).active).toBe(1);
  });
});

describe("cloudq-mongo: state values no Mongo-era server writes", () => {
  it("a document with an unknown state value or none in the layout's field is canceled in get, list and counts alike, and never reserved", async () => {
    const q = queue();
    const now = new Date();
    const { insertedIds } = await jobs().insertMany([
      { queue: q, klass: "Ruby", args: [], workflow_state: "queued", created_at: now },
      { queue: q, klass: "Odd", args: [], queue_state: "on-hold", inserted_at: now },
    ]);
    const { job } = await backend().enqueue(q, { name: "Canceled" });
    await backend().cancel(q, job.id);
    const ids = [...Object.values(insertedIds).map((id) => id.toHexString()), job.id];
    for (const id of ids) expect((await backend().get(q, id))?.state).toBe("canceled");
    const listed = await backend().list(q, { state: "canceled" });
    expect(new Set(listed.items.map((item) => item.id))).toEqual(new Set(ids));
    expect(await backend().counts(q)).toMatchObject({ canceled: 3, waiting: 0, active: 0, failed: 0 });
    expect(await backend().reserve(q, { worker: "w" })).toEqual([]);
  });
});

describe("cloudq-mongo: reserve candidates (candidates.ts)", () => {
  it("with candidateTtlMs, a job made runnable elsewhere may wait behind pooled candidates until this backend enqueues one that sorts before them; with the default 0 it comes first at once", async () => {
    const q = queue();
    const cached = createCloudqBackend({ url: mongoUrl(), database, candidateTtlMs: 60_000 });
    try {
      for (const n of [1, 2, 3, 4, 5]) await cached.enqueue(q, { name: `low-${n}` });
      expect((await cached.reserve(q, { worker: "w" }))[0]?.name).toBe("low-1");
      // Another process enqueues a high-priority job: the cached candidates still come first.
      await jobs().insertOne({
        queue: q,
        klass: "high",
        args: [],
        queue_state: "queued",
        inserted_at: new Date(),
        switchyard: { boost: 10 },
      });
      expect((await cached.reserve(q, { worker: "w" }))[0]?.name).toBe("low-2");
      // This backend's own enqueue of a job that sorts after every pooled candidate (FIFO) keeps the pool.
      await cached.enqueue(q, { name: "low-6" });
      expect((await cached.reserve(q, { worker: "w" }))[0]?.name).toBe("low-3");
      // One that sorts before a pooled candidate (low-4, low-5 are left) drops it: the next reserve
      // reads afresh, in priority order.
      await cached.enqueue(q, { name: "mid", priority: 5 });
      const order = await cached.reserve(q, { worker: "w", count: 4 });
      expect(order.map((job) => job.name)).toEqual(["high", "mid", "low-4", "low-5"]);
      // The default backend keeps the order strict: each reserve reads afresh.
      await jobs().insertOne({
        queue: q,
        klass: "higher",
        args: [],
        queue_state: "queued",
        inserted_at: new Date(),
        switchyard: { boost: 20 },
      });
      expect((await backend().reserve(q, { worker: "w" }))[0]?.name).toBe("higher");
    } finally {
      await cached.close();
    }
  });

  it("after a lost race the candidates are shuffled only within the window ahead; those before and beyond it keep their order", () => {
    const list = Array.from({ length: 100 }, (_, index) => ({ _id: index }));
    spreadAfterLostRace(list, 10, 2);
    expect(list.slice(0, 10).map((candidate) => candidate._id)).toEqual(Array.from({ length: 10 }, (_, index) => index));
    expect(new Set(list.slice(10, 26).map((candidate) => candidate._id))).toEqual(
      new Set(Array.from({ length: 16 }, (_, index) => index + 10)),
    );
    expect(list.slice(26).map((candidate) => candidate._id)).toEqual(Array.from({ length: 74 }, (_, index) => index + 26));
  });
});

describe("cloudq-mongo: results and progress with keys MongoDB cannot store", () => {
  it("progress and a result holding `$` or dotted keys are kept as JSON and come back as they were, through get and import", async () => {
    const keeping = createCloudqBackend({ url: mongoUrl(), database, stateField: "workflow_state", completion: "mark-deleted" });
    try {
      const q = queue();
      const { job } = await keeping.enqueue(q, { name: "reports" });
      await keeping.reserve(q, { worker: "w" });
      await keeping.heartbeat(q, job.id, { worker: "w", progress: { $pct: 10 } });
      expect((await keeping.get(q, job.id))?.progress).toEqual({ $pct: 10 });
      await keeping.setProgress?.(q, job.id, { worker: "w", progress: { "a.b": [2] } });
      expect((await keeping.get(q, job.id))?.progress).toEqual({ "a.b": [2] });
      await keeping.setProgress?.(q, job.id, { worker: "w", progress: { pct: 90 } });
      const plain = await jobs().findOne(rawFilter(q, job.id));
      expect(plain?.switchyard).toMatchObject({ progress: { pct: 90 } });
      expect(plain?.switchyard).not.toHaveProperty("progressJson");
      const result = { $set: [{ "x.y": 1 }] };
      expect((await keeping.complete(q, job.id, { worker: "w", result })).result).toEqual(result);
      const done = await keeping.get(q, job.id);
      expect(done).toMatchObject({ state: "completed", result, progress: { pct: 90 } });
      expect((await jobs().findOne(rawFilter(q, job.id)))?.switchyard).toMatchObject({ resultJson: JSON.stringify(result) });

      const target = queue();
      const imported = await keeping.import(target, [{ ...(done as NonNullable<typeof done>), progress: { $p: 1 } }]);
      expect(imported).toEqual({ imported: 1, skipped: [] });
      expect(await keeping.get(target, job.id)).toMatchObject({ state: "completed", result, progress: { $p: 1 } });
    } finally {
      await keeping.close();
    }
  });
});
