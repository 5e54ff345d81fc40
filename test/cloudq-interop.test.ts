import { randomUUID } from "node:crypto";
import { createCloudqBackend } from "@switchyard/cloudq-mongo";
import type { Backend } from "@switchyard/core";
import { MongoClient, ObjectId } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "./support/services.js";

/**
 * Interop with the Mongo-era Cloudq servers. They cannot run here (Ruby 1.8 + MongoMapper 0.9,
 * node 0.4 + mongoskin), so each test performs exactly the database operations their code performs
 * (twilson63/cloudq lib/cloudq/{app,job}.rb; twilson63/node-cloudq src/queue.coffee at 0.2.0) on
 * the same collection the backend uses, with the current MongoDB driver.
 */
const url = serviceUrl("mongo");
const database = `cloudq_interop_${randomUUID().slice(0, 8)}`;
let client: MongoClient;
const jobs = () => client.db(database).collection("cloudq.jobs");
const queue = () => `interop-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  client = new MongoClient(url);
  await client.connect();
});
afterAll(async () => {
  await client.close();
});

describe("cloudq-mongo interop: node-cloudq 0.2 (queue_state, DELETE removes)", () => {
  let backend: Backend;
  beforeAll(async () => {
    backend = createCloudqBackend({ url, database, stateField: "queue_state", completion: "remove" });
    await backend.ready();
  });
  afterAll(async () => backend.close());

  it("a job node-cloudq 0.2 inserted (queueJob) is reserved and completed through Switchyard", async () => {
    const q = queue();
    // queueJob: _.extend(job, {queue, queue_state: 'queued', inserted_at: new Date()}); insert.
    const posted = { klass: "Archive", args: [{ data: "foobar" }], requested_by: "cron" };
    const { insertedId } = await jobs().insertOne({ ...posted, queue: q, queue_state: "queued", inserted_at: new Date() });
    const [job] = await backend.reserve(q, { worker: "sy-worker" });
    expect(job).toMatchObject({
      id: insertedId.toHexString(),
      name: "Archive",
      data: [{ data: "foobar" }],
      state: "active",
      attempts: 1,
      native: { requested_by: "cron" },
    });
    expect(await jobs().findOne({ _id: insertedId })).toMatchObject({ queue_state: "reserved", updated_at: expect.any(Date) });
    await backend.complete(q, insertedId.toHexString(), { worker: "sy-worker" });
    expect(await jobs().findOne({ _id: insertedId })).toBeNull();
  });

  it("a job Switchyard enqueued is reserved by node-cloudq 0.2's own findAndModify and removed by removeById", async () => {
    const q = queue();
    const { job } = await backend.enqueue(q, { name: "SendEmail", data: ["from@example.com", "to@example.com"] });
    // reserveJob: findAndModify({queue, queue_state: 'queued'}, [['inserted_at','ascending']],
    //   {$set: {queue_state: 'reserved', updated_at: new Date()}}, {new: true}).
    const reserved = await jobs().findOneAndUpdate(
      { queue: q, queue_state: "queued" },
      { $set: { queue_state: "reserved", updated_at: new Date() } },
      { sort: [["inserted_at", "ascending"]], returnDocument: "after" },
    );
    expect(reserved).toMatchObject({ klass: "SendEmail", args: ["from@example.com", "to@example.com"], queue_state: "reserved" });
    expect(reserved?._id.toHexString()).toBe(job.id);
    expect(await backend.get(q, job.id)).toMatchObject({ state: "active", lease: null });
    // Switchyard does not take back a job a legacy worker holds (it has no lease to expire).
    expect(await backend.reserve(q, { worker: "sy-worker" })).toEqual([]);
    // removeJob: removeById(job_id) with the id string the GET response carried.
    await jobs().deleteOne({ _id: new ObjectId(job.id) });
    expect(await backend.get(q, job.id)).toBeNull();
    expect((await backend.counts(q)).active).toBe(0);
  });

  it("jobs from both inserted into one queue are handed out first in, first out by inserted_at", async () => {
    const q = queue();
    const legacy = await jobs().insertOne({
      klass: "Old",
      args: [],
      queue: q,
      queue_state: "queued",
      inserted_at: new Date(Date.now() - 1000),
    });
    const { job: mine } = await backend.enqueue(q, { name: "New", data: [] });
    const order = await backend.reserve(q, { worker: "w", count: 2 });
    expect(order.map((j) => j.id)).toEqual([legacy.insertedId.toHexString(), mine.id]);
  });
});

describe("cloudq-mongo interop: the Ruby server (workflow_state, DELETE marks deleted)", () => {
  let backend: Backend;
  beforeAll(async () => {
    backend = createCloudqBackend({ url, database, stateField: "workflow_state", completion: "mark-deleted" });
    await backend.ready();
  });
  afterAll(async () => backend.close());

  const rubyCreate = async (q: string, klass: string, args: unknown[]) => {
    // Job.create(job.merge(queue: q)): MongoMapper keys plus timestamps!, workflow state 'queued'.
    const now = new Date();
    return (await jobs().insertOne({ queue: q, klass, args, workflow_state: "queued", created_at: now, updated_at: now })).insertedId;
  };

  it("a job the Ruby server created is reserved and completed through Switchyard, leaving it 'deleted' as the Ruby server would", async () => {
    const q = queue();
    const id = await rubyCreate(q, "Archive", ["a", 1]);
    const [job] = await backend.reserve(q, { worker: "w" });
    expect(job).toMatchObject({ id: id.toHexString(), name: "Archive", data: ["a", 1], state: "active" });
    expect(job?.createdAt).toBe((await jobs().findOne({ _id: id }))?.created_at.getTime());
    const done = await backend.complete(q, id.toHexString(), { worker: "w", result: { ok: 1 } });
    expect(done.state).toBe("completed");
    expect(await jobs().findOne({ _id: id })).toMatchObject({ workflow_state: "deleted", switchyard: { result: { ok: 1 } } });
    expect((await backend.counts(q)).completed).toBe(1);
  });

  it("a job Switchyard reserved is finished by the Ruby server's DELETE (delete! sets workflow_state 'deleted')", async () => {
    const q = queue();
    const { job } = await backend.enqueue(q, { name: "Report", data: [2024] });
    await backend.reserve(q, { worker: "w" });
    // DELETE /:queue/:id -> Job.where(queue: q, id: id).first; job.delete! (a save of the state).
    const ruby = await jobs().updateOne(
      { queue: q, _id: new ObjectId(job.id), workflow_state: "reserved" },
      { $set: { workflow_state: "deleted", updated_at: new Date() } },
    );
    expect(ruby.modifiedCount).toBe(1);
    expect(await backend.get(q, job.id)).toMatchObject({ state: "completed" });
    expect(await backend.reserve(q, { worker: "w" })).toEqual([]);
  });

  it("a job Switchyard enqueued is found by the Ruby server's reserve query", async () => {
    const q = queue();
    const { job } = await backend.enqueue(q, { name: "Report", data: [1] });
    // GET /:queue -> Job.where(queue: q, workflow_state: 'queued').first
    const found = await jobs().findOne({ queue: q, workflow_state: "queued" });
    expect(found?._id.toHexString()).toBe(job.id);
  });
});
