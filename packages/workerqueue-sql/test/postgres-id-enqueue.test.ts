import type { Backend, EnqueueResult } from "@switchyard/core";
import { afterAll, describe, expect, it } from "vitest";
import { createWorkerQueueBackend } from "../src/index.js";
import { rawKnex, useDialectTable } from "./dialects.js";

/**
 * PostgreSQL's grouped enqueues with a caller-chosen id (postgres-id-enqueue.ts): those issued
 * together go in one INSERT ... ON CONFLICT DO NOTHING, and only the ids it did not write are read.
 * The rules of the one-at-a-time path hold whatever the group: an id the queue holds answers that
 * job (created false), an id repeated in the group gets its first caller's job, never two rows for
 * one id (also between two backends racing), a refused value fails its own caller only, the
 * default queue's legacy rows and a numeric id naming a row id are found. Rows are read with a
 * connection of the test's own; statements are counted at the backend's own knex.
 */
describe("workerqueue-sql (postgres): grouped enqueues with an id", () => {
  const { url, table, db, open, queue } = useDialectTable("postgres", "wq_idenq");
  const counted = rawKnex(url);
  const sent: string[] = [];
  counted.on("query", (query: { sql: string }) => sent.push(query.sql));
  const other = rawKnex(url);
  const backends: Backend[] = [];
  afterAll(async () => {
    await Promise.all(backends.map((backend) => backend.close()));
    await counted.destroy();
    await other.destroy();
  });
  const openOn = async (knex: typeof counted) => {
    await open(); // creates the table and its trigger
    const backend = createWorkerQueueBackend({ knex, table, releaseDelayedEveryMs: 0 });
    backends.push(backend);
    await backend.ready();
    return backend;
  };
  const statements = async <T>(work: () => Promise<T>): Promise<[T, string[]]> => {
    const from = sent.length;
    const result = await work();
    return [result, sent.slice(from)];
  };
  const rowsOf = async (q: string) => db(table).where("sy_queue", q).orderBy("id");

  it("enqueues with new ids issued together are one statement, and each caller gets its own job, in arrival order", async () => {
    const wq = await openOn(counted);
    const q = queue();
    const ids = Array.from({ length: 30 }, (_, i) => `jid-${i}`);
    const [results, sql] = await statements(() =>
      Promise.all(ids.map((id, i) => wq.enqueue(q, { name: "put", id, data: { i }, priority: i % 3 }))),
    );
    expect(sql).toHaveLength(1);
    expect(results.map((result) => [result.job.id, result.created, result.job.data])).toEqual(ids.map((id, i) => [id, true, { i }]));
    const rows = await rowsOf(q);
    // Row ids drawn in arrival order, one row per id, as written.
    expect(rows.map((row) => [row.sy_job_id, row.status, row.locked_queue_id, row.sy_priority])).toEqual(
      ids.map((id, i) => [id, "pending", "", i % 3]),
    );
  });

  it("an id the queue holds answers that job (created false), an id repeated in the group its first caller's job: one insert and one read", async () => {
    const wq = await openOn(counted);
    const q = queue();
    const { job: held } = await wq.enqueue(q, { name: "held", id: "held", data: { old: true } });
    const inputs = [
      { name: "a", id: "a" },
      { name: "again held", id: "held" },
      { name: "b", id: "b" },
      { name: "a repeated", id: "a" },
    ];
    const [results, sql] = await statements(() => Promise.all(inputs.map((input) => wq.enqueue(q, input))));
    expect(sql).toHaveLength(2);
    expect(results.map((result) => [result.job.id, result.job.name, result.created])).toEqual([
      ["a", "a", true],
      ["held", "held", false],
      ["b", "b", true],
      ["a", "a", false],
    ]);
    expect(results[1]?.job).toEqual(held);
    const rows = await rowsOf(q);
    expect(rows.map((row) => [row.sy_job_id, row.name])).toEqual([
      ["held", "held"],
      ["a", "a"],
      ["b", "b"],
    ]);
  });

  it("two backends (two gateways) racing the same 60 ids: one row per id, and each id created once with every answer naming that row", async () => {
    const one = await openOn(counted);
    const two = await openOn(other);
    const q = queue();
    const ids = Array.from({ length: 60 }, (_, i) => `race-${i}`);
    const calls: Array<Promise<EnqueueResult>> = [];
    for (const id of ids) for (const wq of [one, two, one, two]) calls.push(wq.enqueue(q, { name: "race", id }));
    const results = await Promise.all(calls);
    const rows = await rowsOf(q);
    expect(rows.map((row) => row.sy_job_id).sort()).toEqual([...ids].sort());
    for (const id of ids) {
      const answers = results.filter((result) => result.job.id === id);
      expect(answers).toHaveLength(4);
      expect(answers.filter((result) => result.created)).toHaveLength(1);
      expect(new Set(answers.map((result) => result.job.createdAt))).toEqual(
        new Set([Number(rows.find((row) => row.sy_job_id === id)?.sy_created_ms)]),
      );
    }
  });

  it("a value the database refuses fails its own caller only; the others of its group are written", async () => {
    const wq = await openOn(counted);
    const q = queue();
    const outcomes = await Promise.allSettled([
      wq.enqueue(q, { name: "fine", id: "ok-1" }),
      wq.enqueue(q, { name: "nul \u0000 in text", id: "bad" }),
      wq.enqueue(q, { name: "fine", id: "ok-2" }),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: "VALIDATION" });
    expect((await rowsOf(q)).map((row) => row.sy_job_id)).toEqual(["ok-1", "ok-2"]);
  });

  it("the default queue finds its legacy rows (no sy_queue) by id, and a numeric id naming a row id that row; a new numeric id moves the row-id counter", async () => {
    const wq = await openOn(counted);
    await db(table).insert({ name: "legacy with id", status: "pending", data: "{}", sy_job_id: "legacy-jid" });
    const [plain] = await db(table).insert({ name: "legacy", status: "pending", data: "{}" }).returning("id");
    const rowId = String(plain.id);
    const fresh = String(Number(rowId) + 1000);
    const results = await Promise.all([
      wq.enqueue("default", { name: "again", id: "legacy-jid" }),
      wq.enqueue("default", { name: "again", id: rowId }),
      wq.enqueue("default", { name: "numeric", id: fresh }),
      wq.enqueue("default", { name: "new", id: "new-default-jid" }),
    ]);
    expect(results.map((result) => [result.job.name, result.created])).toEqual([
      ["legacy with id", false],
      ["legacy", false],
      ["numeric", true],
      ["new", true],
    ]);
    expect(results[1]?.job.id).toBe(rowId);
    expect(await db(table).where("sy_job_id", "legacy-jid").count({ n: "*" })).toEqual([{ n: "1" }]);
    expect(await db(table).where("sy_queue", "default").whereIn("name", ["again"]).count({ n: "*" })).toEqual([{ n: "0" }]);
    // No later row gets the numeric id as its own row id.
    const { job: after } = await wq.enqueue("default", { name: "after" });
    expect(Number(after.id)).toBeGreaterThan(Number(fresh));
  });
});
