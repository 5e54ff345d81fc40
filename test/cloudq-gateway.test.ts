import { randomUUID } from "node:crypto";
import { type Gateway, createGateway } from "@switchyard/gateway";
import { type Document, MongoClient, ObjectId } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "./support/services.js";

/**
 * The raw `cloudq.jobs` documents after a publish, a reserve and a delete through the gateway's
 * Cloudq door, compared with what node-cloudq 0.2 writes for the same job (src/queue.coffee:
 * queueJob, reserveJob's findAndModify, removeJob's removeById, performed here with the driver).
 */
const url = serviceUrl("mongo");
const database = `cloudq_gateway_${randomUUID().slice(0, 8)}`;
let client: MongoClient;
let gateway: Gateway;
const jobs = () => client.db(database).collection("cloudq.jobs");
const queue = () => `door-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  client = new MongoClient(url);
  await client.connect();
  gateway = await createGateway({
    config: { backends: { m: { type: "cloudq-mongo", url, options: { database } } }, routes: [{ pattern: "*", backend: "m" }] },
    env: {},
  });
});
afterAll(async () => {
  await gateway?.close();
  await client.close();
});

const send = async (method: string, path: string, body?: unknown) => {
  const response = await gateway.app.request(path, {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
};

/** Field names with the type of each value: what "field for field" compares, since ids and times differ. */
const shape = (document: Document | null) =>
  Object.fromEntries(
    Object.entries(document ?? {})
      .filter(([key]) => key !== "switchyard")
      .map(([key, value]) => [key, value instanceof ObjectId ? "ObjectId" : value instanceof Date ? "Date" : JSON.stringify(value)])
      .sort(([a], [b]) => String(a).localeCompare(String(b))),
  );

/** node-cloudq 0.2, step by step, on a queue of its own. */
const nodeCloudq = {
  queueJob: async (name: string, job: Record<string, unknown>) =>
    (await jobs().insertOne({ ...job, queue: name, queue_state: "queued", inserted_at: new Date() })).insertedId,
  reserveJob: (name: string) =>
    jobs().findOneAndUpdate(
      { queue: name, queue_state: "queued" },
      { $set: { queue_state: "reserved", updated_at: new Date() } },
      { sort: [["inserted_at", "ascending"]], returnDocument: "after" },
    ),
  removeJob: (id: string) => jobs().deleteOne({ _id: new ObjectId(id) }),
};

describe("cloudq-mongo behind the gateway's Cloudq door: raw documents match node-cloudq 0.2's", () => {
  it("after publish, reserve and delete the documents hold node-cloudq 0.2's fields, values and types", async () => {
    const job = { klass: "Archive", args: [{ data: "foobar" }], requested_by: "cron" };
    const door = queue();
    const legacy = queue();

    expect(await send("POST", `/cloudq/${door}`, { job })).toEqual({ status: 200, json: { status: "success" } });
    const legacyId = await nodeCloudq.queueJob(legacy, { ...job });
    const published = await jobs().findOne({ queue: door });
    const reference = await jobs().findOne({ _id: legacyId });
    expect(shape(published)).toEqual({ ...shape(reference), queue: JSON.stringify(door) });
    expect(published).not.toHaveProperty("switchyard");

    const reserved = await send("GET", `/cloudq/${door}`);
    expect(reserved.json).toMatchObject({ klass: "Archive", args: [{ data: "foobar" }], id: published?._id.toHexString() });
    await nodeCloudq.reserveJob(legacy);
    const afterReserve = await jobs().findOne({ queue: door });
    const referenceReserved = await jobs().findOne({ _id: legacyId });
    expect(shape(afterReserve)).toEqual({ ...shape(referenceReserved), queue: JSON.stringify(door) });
    expect(afterReserve).toMatchObject({ queue_state: "reserved", switchyard: { attempts: 1, lease: { worker: expect.any(String) } } });

    expect(await send("DELETE", `/cloudq/${door}/${String(reserved.json.id)}`)).toEqual({ status: 200, json: { status: "success" } });
    await nodeCloudq.removeJob(legacyId.toHexString());
    expect(await jobs().findOne({ queue: door })).toBeNull();
    expect(await jobs().findOne({ _id: legacyId })).toBeNull();
  });

  it("a job node-cloudq 0.2 queued is served by the door's GET and finished by its DELETE", async () => {
    const q = queue();
    const id = await nodeCloudq.queueJob(q, { klass: "SendEmail", args: ["a@example.com"] });
    const reserved = await send("GET", `/cloudq/${q}`);
    expect(reserved.json).toMatchObject({ klass: "SendEmail", args: ["a@example.com"], id: id.toHexString() });
    expect(await send("DELETE", `/cloudq/${q}/${id.toHexString()}`)).toEqual({ status: 200, json: { status: "success" } });
    expect(await jobs().findOne({ _id: id })).toBeNull();
    expect((await send("GET", `/cloudq/${q}`)).json).toEqual({ status: "empty" });
  });
});
