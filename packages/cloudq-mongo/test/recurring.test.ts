import type { Recurrence } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { RECURRING_INDEXES, createCloudqBackend } from "../src/index.js";
import { mongoUrl, useCloudqDatabase } from "./helpers.js";

/**
 * The recurring jobs' side collection as the driver sees it, never through the adapter: the
 * conformance suite checks the round trip, these check the native layout behind it.
 */
const { database, client, backend, queue } = useCloudqDatabase("recurring", "rec");
const recurring = (name = "cloudq.recurring") => client().db(database).collection<{ _id: string }>(name);

function recurrenceIn(q: string, fields: Partial<Recurrence> = {}): Recurrence {
  return {
    id: `r-${Math.random().toString(36).slice(2, 10)}`,
    queue: q,
    name: "Report",
    data: { $where: 1, "a.b": ["nul\u0000"], nested: { ok: true } },
    priority: 3,
    tags: ["nightly"],
    maxAttempts: 4,
    intervalMs: 1500.5,
    nextAt: 1_700_000_000_000.25,
    count: 2,
    backlog: 1,
    native: { qless: { data: '{"$where": 1}' }, "x.y": "\u0000" },
    ...fields,
  };
}

describe("cloudq-mongo: the recurring jobs' side collection", () => {
  it("a put recurrence is one document in cloudq.recurring, _id its id, data and native as JSON text", async () => {
    const recurrence = recurrenceIn(queue());
    await backend().putRecurrence(recurrence);
    const raw = await recurring().findOne({ _id: recurrence.id });
    expect(raw).toEqual({
      _id: recurrence.id,
      queue: recurrence.queue,
      name: "Report",
      dataJson: JSON.stringify(recurrence.data),
      priority: 3,
      tags: ["nightly"],
      maxAttempts: 4,
      intervalMs: 1500.5,
      nextAt: 1_700_000_000_000.25,
      count: 2,
      backlog: 1,
      nativeJson: JSON.stringify(recurrence.native),
    });
    expect(await backend().recurrence(recurrence.id)).toEqual(recurrence);
  });

  it("putting the id again replaces the one document; advancing sets its count and nextAt", async () => {
    const recurrence = recurrenceIn(queue());
    await backend().putRecurrence(recurrence);
    const moved = { ...recurrence, queue: queue(), name: "Moved" };
    await backend().putRecurrence(moved);
    expect(await recurring().countDocuments({ _id: recurrence.id })).toBe(1);
    expect(await recurring().findOne({ _id: recurrence.id })).toMatchObject({ queue: moved.queue, name: "Moved" });
    expect(await backend().advanceRecurrence(recurrence.id, 2, 4, 1_700_000_003_001)).toBe(true);
    expect(await recurring().findOne({ _id: recurrence.id })).toMatchObject({ count: 4, nextAt: 1_700_000_003_001 });
  });

  // FerretDB 1.x makes a conditional update a read and then a write: without the claim token
  // (measured) most rounds of 4 concurrent advances had several of them matching.
  it("of 8 concurrent advances from one count exactly one is told true, round after round", async () => {
    const recurrence = recurrenceIn(queue(), { count: 0 });
    await backend().putRecurrence(recurrence);
    for (let round = 0; round < 10; round++) {
      const outcomes = await Promise.all(
        Array.from({ length: 8 }, (_, n) => backend().advanceRecurrence(recurrence.id, round, round + 1, 1_000 * round + n)),
      );
      expect(outcomes.filter(Boolean)).toHaveLength(1);
      expect(await recurring().findOne({ _id: recurrence.id })).toMatchObject({ count: round + 1 });
    }
  });

  it("the claim token of an advance is given back, so a recurrence put back to that count advances again", async () => {
    const recurrence = recurrenceIn(queue(), { count: 5 });
    await backend().putRecurrence(recurrence);
    expect(await backend().advanceRecurrence(recurrence.id, 5, 6, 1)).toBe(true);
    await backend().putRecurrence(recurrence);
    expect(await backend().advanceRecurrence(recurrence.id, 5, 6, 2)).toBe(true);
    expect(await recurring().findOne({ _id: recurrence.id })).toMatchObject({ count: 6, nextAt: 2 });
    expect(
      await client()
        .db(database)
        .collection("cloudq.claims")
        .countDocuments({ _id: `${recurrence.id}:5:recurrence` as never }),
    ).toBe(0);
  });

  it("a removed recurrence's document is gone, and the others of its queue stay", async () => {
    const q = queue();
    const [gone, kept] = [recurrenceIn(q), recurrenceIn(q)];
    await backend().putRecurrence(gone);
    await backend().putRecurrence(kept);
    expect(await backend().removeRecurrence(gone.id)).toBe(true);
    expect(await recurring().findOne({ _id: gone.id })).toBeNull();
    expect((await recurring().find({ queue: q }).toArray()).map((document) => document._id)).toEqual([kept.id]);
  });

  it("ready() creates the index on (queue, nextAt, _id) that recurrences() reads in order", async () => {
    const index = (await recurring().listIndexes().toArray()).find((found) => found.name === "switchyard_recurring_queue_next");
    expect(index?.key).toEqual({ queue: 1, nextAt: 1, _id: 1 });
    expect(RECURRING_INDEXES.map((described) => described.key)).toEqual([{ queue: 1, nextAt: 1, _id: 1 }]);
  });

  it("recurringCollection names the collection the documents and the index go to", async () => {
    const other = createCloudqBackend({ url: mongoUrl(), database, recurringCollection: "ops.recurring" });
    try {
      await other.ready();
      const recurrence = recurrenceIn(queue());
      await other.putRecurrence(recurrence);
      expect(await recurring("ops.recurring").findOne({ _id: recurrence.id })).toMatchObject({ queue: recurrence.queue });
      expect(await recurring().findOne({ _id: recurrence.id })).toBeNull();
      const names = (await recurring("ops.recurring").listIndexes().toArray()).map((found) => found.name);
      expect(names).toContain("switchyard_recurring_queue_next");
    } finally {
      await other.close();
    }
  });
});
