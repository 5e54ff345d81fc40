import { hasJobLookup, hasJobRemoval } from "@switchyard/core";
import { type CommandStartedEvent, MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCloudqBackend } from "../src/index.js";
import { traitsOf } from "../src/store.js";
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

interface JobsRead {
  command: "find" | "distinct" | "delete";
  filter: Record<string, unknown>;
}

/** A read or delete command on the jobs collection with its filter, or null for any other command. */
function jobsRead(event: CommandStartedEvent): JobsRead | null {
  const command = event.command as Record<string, unknown>;
  if (command.find === "cloudq.jobs") return { command: "find", filter: (command.filter ?? {}) as Record<string, unknown> };
  if (command.distinct === "cloudq.jobs") return { command: "distinct", filter: (command.query ?? {}) as Record<string, unknown> };
  if (command.delete === "cloudq.jobs") {
    const deletes = (command.deletes ?? []) as Array<{ q: Record<string, unknown> }>;
    return { command: "delete", filter: Object.assign({}, ...deletes.map((one) => one.q)) };
  }
  return null;
}

/** No read or delete of these by id asks FerretDB 1.x for what it would answer by reading every document. */
function expectEqualitiesOnly(reads: JobsRead[]): void {
  expect(reads.length).toBeGreaterThan(0);
  const text = JSON.stringify(reads.map((read) => read.filter));
  expect(text).not.toContain("$or");
  expect(text).not.toContain("$in");
  const nestedFinds = reads.filter((read) => read.command === "find" && Object.keys(read.filter).some((key) => key.includes(".")));
  expect(nestedFinds).toEqual([]);
}

describe("cloudq-mongo: looking jobs up on FerretDB 1.x", () => {
  it("tells FerretDB 1.x from MongoDB and later FerretDB by buildInfo", () => {
    expect(traitsOf({}).equalitiesOnly).toBe(false);
    expect(traitsOf({ ferretdbVersion: "v2.1.0" }).equalitiesOnly).toBe(false);
    expect(traitsOf({ ferretdbVersion: "v1.24.2" }).equalitiesOnly).toBe(true);
  });

  it("finds, reserves and removes a job by equalities, never an $or, an $in or a find on a nested field alone (each reads every document there)", async () => {
    const info = await client.db("admin").command({ buildInfo: 1 });
    expect(info.ferretdbVersion, "the test setup's MongoDB-compatible server is FerretDB 1.x").toMatch(/^v1\./);
    const monitored = new MongoClient(mongoUrl(), { monitorCommands: true });
    const reads: JobsRead[] = [];
    monitored.on("commandStarted", (event) => {
      const read = jobsRead(event);
      if (read) reads.push(read);
    });
    const watched = createCloudqBackend({ client: monitored, database, completion: "mark-deleted" });
    try {
      const q = queue("equalities");
      const jid = `jid-${Math.random().toString(36).slice(2, 10)}`;
      await watched.enqueue(q, { name: "chosen", id: jid });
      const { job: native } = await watched.enqueue(q, { name: "native" });
      reads.length = 0;

      expect(await watched.get(q, jid)).toMatchObject({ id: jid, name: "chosen" });
      expect(await watched.get(q, native.id)).toMatchObject({ id: native.id, name: "native" });
      expect(await watched.get(q, `${jid}-missing`)).toBeNull();
      expect((await watched.getMany?.(q, [native.id, `${jid}-missing`, jid]))?.map((job) => job?.name ?? null)).toEqual([
        "native",
        null,
        "chosen",
      ]);
      if (!hasJobLookup(watched)) throw new Error("cloudq-mongo has no JobLookup");
      expect(await watched.queuesHolding(jid)).toEqual([q]);
      expect((await watched.enqueue(q, { name: "again", id: jid })).created).toBe(false);
      expectEqualitiesOnly(reads);

      // A reserve reads the queue's candidates one native state at a time, each named by an equality.
      reads.length = 0;
      const [held] = await watched.reserve(q, { worker: "w", count: 1 });
      expect(held?.id).toBe(jid);
      const candidateFinds = reads.filter((read) => read.command === "find");
      expect(candidateFinds.length).toBeGreaterThan(0);
      expect(candidateFinds.map((read) => typeof read.filter.queue_state)).toEqual(candidateFinds.map(() => "string"));
      const { job: other } = await watched.enqueue(q, { name: "other" });
      // The reserved job stays; the other goes; an id the queue does not hold is not answered.
      if (!hasJobRemoval(watched)) throw new Error("cloudq-mongo has no JobRemoval");
      reads.length = 0;
      expect(await watched.remove(q, [jid, other.id, `${jid}-missing`])).toEqual([other.id]);
      expect(await jobs().countDocuments({ queue: q })).toBe(2);
      expectEqualitiesOnly(reads);
    } finally {
      await watched.close();
      await monitored.close();
    }
  });
});
