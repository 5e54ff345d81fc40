import { hasJobLookup } from "@switchyard/core";
import type { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCloudqBackend } from "../src/index.js";
import { mongoUrl, rawClient, rawFilter, testDatabase } from "./helpers.js";

/**
 * queuesHolding (core's JobLookup): the queues in which get() finds an id, whichever way the id is
 * stored: a caller-chosen id (a qless jid) in `switchyard.id`, a Cloudq id as the ObjectId `_id`, a
 * hand-inserted document's number `_id`. Probed against the documents themselves.
 */
const database = testDatabase("lookup");
let client: MongoClient;
const jobs = () => client.db(database).collection("cloudq.jobs");
const backend = createCloudqBackend({ url: mongoUrl(), database, completion: "mark-deleted" });
const queue = (tag: string) => `lookup-${tag}-${Math.random().toString(36).slice(2, 10)}`;

beforeAll(async () => {
  client = await rawClient();
  await backend.ready();
});
afterAll(async () => {
  await backend.close();
  await client.db(database).dropDatabase();
  await client.close();
});

describe("cloudq-mongo: queuesHolding", () => {
  it("names, in name order, the queues holding a caller-chosen id, an ObjectId id and a number _id", async () => {
    if (!hasJobLookup(backend)) throw new Error("cloudq-mongo has no JobLookup");
    const [a, b, other] = [queue("a"), queue("b"), queue("other")];
    const jid = `jid-${Math.random().toString(36).slice(2, 10)}`;
    await backend.enqueue(b, { name: "held", id: jid });
    await backend.enqueue(a, { name: "held", id: jid });
    await backend.enqueue(other, { name: "held", id: `${jid}-not` });
    expect(await backend.queuesHolding(jid)).toEqual([a, b].sort());
    expect(await jobs().countDocuments({ "switchyard.id": jid })).toBe(2);

    const { job } = await backend.enqueue(other, { name: "native" });
    expect(job.id).toMatch(/^[0-9a-f]{24}$/);
    expect(await backend.queuesHolding(job.id)).toEqual([other]);
    expect(await jobs().countDocuments(rawFilter(other, job.id))).toBe(1);

    const legacy = queue("legacy");
    await jobs().insertOne({
      _id: 424242 as never,
      queue: legacy,
      state: "queued",
      job: { klass: "Old", args: [] },
      inserted_at: new Date(),
    });
    expect(await backend.get(legacy, "424242")).toMatchObject({ id: "424242" });
    expect(await backend.queuesHolding("424242")).toEqual([legacy]);
    expect(await backend.queuesHolding(`never-${jid}`)).toEqual([]);
  });
});
