import { describe, expect, it } from "vitest";
import { createCloudqBackend, indexesFor } from "../src/index.js";
import { mongoUrl, rawFilter, useCloudqDatabase } from "./helpers.js";

const { database, client, backend, jobs, queue } = useCloudqDatabase("layout", "lay");

describe("cloudq-mongo: the document layout node-cloudq 0.2 writes", () => {
  it("a plain publish writes exactly node-cloudq 0.2's fields: _id, klass, args, queue, queue_state, inserted_at", async () => {
    const q = queue();
    const before = Date.now();
    const { job } = await backend().enqueue(q, { name: "Archive", data: [{ data: "foobar" }] });
    const raw = await jobs().findOne(rawFilter(q, job.id));
    expect(Object.keys(raw ?? {}).sort()).toEqual(["_id", "args", "inserted_at", "klass", "queue", "queue_state"]);
    expect(raw).toMatchObject({ klass: "Archive", args: [{ data: "foobar" }], queue: q, queue_state: "queued" });
    expect(raw?._id.toHexString()).toBe(job.id);
    expect(raw?.inserted_at).toBeInstanceOf(Date);
    expect((raw?.inserted_at as Date).getTime()).toBeGreaterThanOrEqual(before - 1000);
  });

  it("a reserve sets queue_state 'reserved' and updated_at as node-cloudq 0.2 does, and keeps the lease in the switchyard sub-document", async () => {
    const q = queue();
    const { job } = await backend().enqueue(q, { name: "Archive", data: [1] });
    await backend().reserve(q, { worker: "w1", leaseMs: 10_000 });
    const raw = await jobs().findOne(rawFilter(q, job.id));
    expect(Object.keys(raw ?? {}).sort()).toEqual([
      "_id",
      "args",
      "inserted_at",
      "klass",
      "queue",
      "queue_state",
      "switchyard",
      "updated_at",
    ]);
    expect(raw?.queue_state).toBe("reserved");
    expect(raw?.updated_at).toBeInstanceOf(Date);
    expect(raw?.switchyard).toMatchObject({ attempts: 1, lease: { worker: "w1" } });
  });

  it("complete() in the default mode removes the document, as node-cloudq 0.0.5+ DELETE does", async () => {
    const q = queue();
    const { job } = await backend().enqueue(q, { name: "Archive", data: [] });
    await backend().reserve(q, { worker: "w" });
    await backend().complete(q, job.id);
    expect(await jobs().findOne(rawFilter(q, job.id))).toBeNull();
  });

  it("a non-array data value is stored as args [value] and comes back unwrapped", async () => {
    const q = queue();
    const { job } = await backend().enqueue(q, { name: "Mail", data: { to: "a@example.com" } });
    const raw = await jobs().findOne(rawFilter(q, job.id));
    expect(raw?.args).toEqual([{ to: "a@example.com" }]);
    expect((await backend().get(q, job.id))?.data).toEqual({ to: "a@example.com" });
  });

  it("native fields are top-level document keys; names the layout owns are kept aside and still round-trip", async () => {
    const q = queue();
    const native = { callback: "http://example.com/done", queue_state: "bogus", "a.b": 1 };
    const { job } = await backend().enqueue(q, { name: "Hook", data: [], native });
    const raw = await jobs().findOne(rawFilter(q, job.id));
    expect(raw?.callback).toBe("http://example.com/done");
    expect(raw?.queue_state).toBe("queued");
    expect((await backend().get(q, job.id))?.native).toEqual(native);
  });

  it("failed and canceled jobs hold states the legacy query {queue, queue_state: 'queued'} skips", async () => {
    const q = queue();
    const { job: doomed } = await backend().enqueue(q, { name: "Doomed", maxAttempts: 1 });
    const { job: dropped } = await backend().enqueue(q, { name: "Dropped" });
    await backend().reserve(q, { worker: "w" });
    await backend().fail(q, doomed.id, { worker: "w", error: { message: "no" } });
    await backend().cancel(q, dropped.id);
    expect(await jobs().countDocuments({ queue: q, queue_state: "queued" })).toBe(0);
    expect((await jobs().find({ queue: q }).toArray()).map((d) => d.queue_state).sort()).toEqual(["canceled", "failed"]);
  });

  it("a blocked job holds the state 'blocked', which the legacy query skips, until its parent completes", async () => {
    const q = queue();
    const { job: parent } = await backend().enqueue(q, { name: "first" });
    const { job: child } = await backend().enqueue(q, { name: "then", dependsOn: [parent.id] });
    expect(await jobs().findOne(rawFilter(q, child.id))).toMatchObject({ queue_state: "blocked", switchyard: { dependsOn: [parent.id] } });
    expect((await jobs().findOne({ queue: q, queue_state: "queued" }))?._id.toHexString()).toBe(parent.id);
    await backend().reserve(q, { worker: "w" });
    await backend().complete(q, parent.id, { worker: "w" });
    expect((await jobs().findOne(rawFilter(q, child.id)))?.queue_state).toBe("queued");
  });

  it("a legacy document without the sub-document sorts as priority 0, between positive and negative priorities", async () => {
    const q = queue();
    const low = await backend().enqueue(q, { name: "low", priority: -5 });
    await jobs().insertOne({ klass: "legacy", args: [], queue: q, queue_state: "queued", inserted_at: new Date() });
    const high = await backend().enqueue(q, { name: "high", priority: 5 });
    const order = await backend().reserve(q, { worker: "w", count: 3 });
    expect(order.map((j) => j.name)).toEqual(["high", "legacy", "low"]);
    expect(order[0]?.id).toBe(high.job.id);
    expect(order[2]?.id).toBe(low.job.id);
    expect(order[1]?.priority).toBe(0);
  });

  it("a job a legacy server reserved has no lease: complete() naming a worker is refused, complete() without one finishes it", async () => {
    const q = queue();
    const { insertedId } = await jobs().insertOne({ klass: "Old", args: [], queue: q, queue_state: "reserved", inserted_at: new Date() });
    const id = insertedId.toHexString();
    expect(await backend().get(q, id)).toMatchObject({ state: "active", lease: null });
    await expect(backend().complete(q, id, { worker: "w" })).rejects.toMatchObject({ code: "LEASE_LOST" });
    await expect(backend().heartbeat(q, id, { worker: "w" })).rejects.toMatchObject({ code: "LEASE_LOST" });
    expect((await backend().complete(q, id)).state).toBe("completed");
    expect(await jobs().findOne({ _id: insertedId })).toBeNull();
  });

  it("an id that cannot be the _id, or whose ObjectId another queue holds, is kept in switchyard.id and found by it", async () => {
    const q = queue();
    const other = queue();
    const { job: named } = await backend().enqueue(q, { id: "order-42", name: "charge", data: [] });
    expect(named.id).toBe("order-42");
    expect(await jobs().findOne({ queue: q, "switchyard.id": "order-42" })).toMatchObject({ klass: "charge" });
    const { job: first } = await backend().enqueue(other, { name: "x", data: [] });
    const { job: twin } = await backend().enqueue(q, { id: first.id, name: "twin", data: [] });
    expect(twin.id).toBe(first.id);
    expect((await backend().get(q, first.id))?.name).toBe("twin");
    expect((await backend().get(other, first.id))?.name).toBe("x");
  });

  it("the unique key is released when its job finishes, so a later enqueue with that key makes a new job", async () => {
    const q = queue();
    const first = await backend().enqueue(q, { name: "once", uniqueKey: "k" });
    await backend().reserve(q, { worker: "w" });
    await backend().complete(q, first.job.id, { worker: "w" });
    const second = await backend().enqueue(q, { name: "once", uniqueKey: "k" });
    expect(second.created).toBe(true);
    expect(second.job.id).not.toBe(first.job.id);
  });
});

describe("cloudq-mongo: indexes", () => {
  it("ready() creates the indexes once; a second backend's ready() on the same collection changes nothing", async () => {
    const names = async () => (await jobs().listIndexes().toArray()).map((index) => String(index.name)).sort();
    const first = await names();
    expect(first).toEqual(expect.arrayContaining(indexesFor("queue_state").map((index) => String(index.name))));
    const again = createCloudqBackend({ url: mongoUrl(), database });
    await again.ready();
    await again.close();
    expect(await names()).toEqual(first);
  });

  it("the unique-slot index is unique and sparse, so legacy documents without the sub-document never collide", async () => {
    const slot = (await jobs().listIndexes().toArray()).find((index) => index.name === "switchyard_unique_slot");
    expect(slot).toMatchObject({ key: { "switchyard.uniqueSlot": 1 }, unique: true });
    const q = queue();
    await jobs().insertMany([
      { klass: "a", args: [], queue: q, queue_state: "queued" },
      { klass: "b", args: [], queue: q, queue_state: "queued" },
    ]);
    expect(await jobs().countDocuments({ queue: q })).toBe(2);
  });
});
