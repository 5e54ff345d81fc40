import { type Backend, hasJobLookup } from "@switchyard/core";
import { afterAll, describe, expect, it } from "vitest";
import { createWorkerQueueBackend } from "../src/index.js";
import { rawKnex, useDialectTable } from "./dialects.js";

/**
 * The grouped JobLookup (grouped-lookup.ts): queuesHolding() calls issued together are one statement
 * on PostgreSQL and one script on MariaDB, and each caller gets the queues holding its own id, in name order, as a look-up of its
 * own answers (the default queue for rows without a queue, the row a numeric id names by row id).
 * The answers are checked against the rows, read with a connection of the test's own.
 */
for (const dialect of ["postgres", "mysql"] as const)
  describe(`workerqueue-sql (${dialect}): grouped queuesHolding`, () => {
    const { url, table, db, open, queue } = useDialectTable(dialect, "wq_holding");
    const counted = rawKnex(url);
    let statements = 0;
    counted.on("query", () => statements++);
    const backends: Backend[] = [];
    afterAll(async () => {
      await Promise.all(backends.map((backend) => backend.close()));
      await counted.destroy();
    });

    it("look-ups issued together share one statement (a script on MariaDB); each answers its own id's queues in name order", async () => {
      await open(); // creates the table and its trigger
      const wq = createWorkerQueueBackend({ knex: counted, table, releaseDelayedEveryMs: 0 });
      backends.push(wq);
      await wq.ready();
      if (!hasJobLookup(wq)) throw new Error("workerqueue-sql declares no JobLookup");
      const [a, b, c] = [queue("c"), queue("a"), queue("b")];
      await wq.enqueue(a, { name: "shared", id: "jid-1" });
      await wq.enqueue(c, { name: "shared", id: "jid-1" });
      await wq.enqueue(b, { name: "shared", id: "jid-1" });
      await wq.enqueue(b, { name: "other", id: "jid-2" });
      const { job: byRowId } = await wq.enqueue(c, { name: "row id" });
      // Legacy rows: no queue; one with a job id of its own, one known by its row id.
      await db(table).insert({ name: "legacy jid", status: "pending", data: "{}", sy_job_id: "jid-2" });
      const legacy = { name: "legacy", status: "pending", data: "{}" };
      const legacyId =
        dialect === "postgres" ? (await db(table).insert(legacy).returning("id"))[0].id : (await db(table).insert(legacy))[0];

      const ids = ["jid-1", "jid-2", byRowId.id, String(legacyId), "no-such-job", "jid-1"];
      const before = statements;
      const answers = await Promise.all(ids.map((id) => wq.queuesHolding(id)));
      expect(statements - before).toBe(1);
      expect(answers).toEqual([[a, b, c].sort(), [b, "default"].sort(), [c], ["default"], [], [a, b, c].sort()]);
      // Each answer is what the rows say: a queue whose get() finds the job.
      for (const [i, id] of ids.entries()) for (const holder of answers[i] ?? []) expect((await wq.get(holder, id))?.id).toBe(id);
    });
  });
