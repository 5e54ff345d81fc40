import { hasJobLookup } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { createWorkerQueueBackend } from "../src/index.js";
import { DIALECTS, type RanStatement, rawKnex, recordSqliteStatements, useDialectTable } from "./dialects.js";

/**
 * The queue names and the queues holding a job id, read by seeks in the queue index (not a scan of
 * every row): the same answers as a DISTINCT over the table would give, rows without a queue (Worker
 * Queue's own producers) counting as the default queue's.
 */
for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): queue names and job lookup`, () => {
    const { table, db, open, queue, url } = useDialectTable(dialect, "wq_lookup");

    it("queues() lists every queue once, the default queue for rows without one; queuesHolding() the queues holding an id", async () => {
      const wq = await open();
      if (!hasJobLookup(wq)) throw new Error("workerqueue-sql declares no JobLookup");
      const [a, b, c] = [queue("a"), queue("b"), queue("c")];
      await wq.enqueue(a, { name: "shared", id: "jid-1" });
      await wq.enqueue(c, { name: "shared", id: "jid-1" });
      await wq.enqueue(b, { name: "other", id: "jid-2" });
      for (let i = 0; i < 5; i++) await wq.enqueue(b, { name: `many ${i}` });
      const { job: byRowId } = await wq.enqueue(c, { name: "row id" });
      // A legacy producer's row: no queue, no job id.
      await db(table).insert({ name: "legacy", status: "pending", data: "{}" });
      const legacy = (await db(table).whereNull("sy_queue").first()) as { id: number };

      const distinct = (await db(table).distinct("sy_queue")).map((row: { sy_queue: string | null }) => row.sy_queue ?? "default");
      expect(await wq.queues()).toEqual([...new Set(distinct)].sort());
      expect(await wq.queues()).toEqual([a, b, c, "default"].sort());

      expect(await wq.queuesHolding("jid-1")).toEqual([a, c].sort());
      expect(await wq.queuesHolding("jid-2")).toEqual([b]);
      expect(await wq.queuesHolding(byRowId.id)).toEqual([c]);
      expect(await wq.queuesHolding(String(legacy.id))).toEqual(["default"]);
      expect(await wq.queuesHolding("no-such-job")).toEqual([]);
      // Each answer names a queue whose get() finds the job.
      for (const id of ["jid-1", "jid-2", byRowId.id, String(legacy.id)])
        for (const holder of await wq.queuesHolding(id)) expect((await wq.get(holder, id))?.id).toBe(id);
    });

    it("look-ups made at once are each answered for their own id (SQLite: on the connection, none through knex)", async () => {
      const counted = rawKnex(url);
      const ran: RanStatement[] = [];
      if (dialect === "sqlite") await recordSqliteStatements(counted, ran);
      const wq = createWorkerQueueBackend({ knex: counted, table });
      try {
        if (!hasJobLookup(wq)) throw new Error("workerqueue-sql declares no JobLookup");
        const [a, b] = [queue("at-once-a"), queue("at-once-b")];
        await wq.enqueue(a, { name: "one queue", id: "jid-a" });
        await wq.enqueue(a, { name: "two queues", id: "jid-ab" });
        await wq.enqueue(b, { name: "two queues", id: "jid-ab" });
        const { job: byRowId } = await wq.enqueue(b, { name: "row id" });
        let knexQueries = 0;
        counted.on("query", () => knexQueries++);
        const ranBefore = ran.length;
        const ids = ["jid-a", "jid-ab", "jid-none", byRowId.id, "jid-a"];
        const answers = await Promise.all(ids.map((id) => wq.queuesHolding(id)));
        expect(answers).toEqual([[a], [a, b].sort(), [], [b], [a]]);
        if (dialect === "sqlite") {
          expect(knexQueries).toBe(0);
          expect(ran.slice(ranBefore).map((statement) => statement.bindings[0])).toEqual(ids);
        }
      } finally {
        await wq.close();
        await counted.destroy();
      }
    });
  });
}
