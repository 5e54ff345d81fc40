import { type Job, completeAndReserve } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { createWorkerQueueBackend } from "../src/index.js";
import { DIALECTS, type RanStatement, rawKnex, recordSqliteStatements, useDialectTable } from "./dialects.js";

/**
 * The batched write paths: a bulk in one multi-row insert, an import that answers what it wrote,
 * a reserve and a complete of one statement each, SQLite's enqueues of one turn in one transaction.
 * Each is checked against the rows themselves, read with a connection of the test's own.
 */
for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): batched writes`, () => {
    const { url, table, db, open, queue: nextQueue } = useDialectTable(dialect, "wq_batch");
    const queue = () => nextQueue("batch");
    const rowsOf = async (q: string) => db(table).where("sy_queue", q).orderBy("id");

    it("enqueueBulk writes the new jobs in the order given (row ids ascending), answers held ids and keys with their job, and creates nothing for them", async () => {
      const wq = await open();
      const q = queue();
      const { job: earlier } = await wq.enqueue(q, { name: "earlier", id: "kept", uniqueKey: "k0" });
      const results = await wq.enqueueBulk(q, [
        { name: "a" },
        { name: "held id", id: "kept" },
        { name: "b", uniqueKey: "k1" },
        { name: "held key", uniqueKey: "k0" },
        { name: "repeats b's key", uniqueKey: "k1" },
        { name: "c", id: "c-id" },
        { name: "repeats c's id", id: "c-id" },
      ]);
      expect(results.map((result) => [result.job.name, result.created])).toEqual([
        ["a", true],
        ["earlier", false],
        ["b", true],
        ["earlier", false],
        ["b", false],
        ["c", true],
        ["c", false],
      ]);
      expect(results[1]?.job.id).toBe(earlier.id);
      const rows = await rowsOf(q);
      expect(rows.map((row) => row.name)).toEqual(["earlier", "a", "b", "c"]);
      expect(rows.map((row) => [row.status, row.locked_queue_id, row.sy_job_id, row.sy_unique_slot])).toEqual([
        ["pending", "", "kept", "k0"],
        ["pending", "", null, null],
        ["pending", "", null, "k1"],
        ["pending", "", "c-id", null],
      ]);
      expect(results.filter((result) => result.created).map((result) => result.job.id)).toEqual([
        String(rows[1]?.id),
        String(rows[2]?.id),
        "c-id",
      ]);
    });

    it("enqueueBulk of 2,500 jobs (several statements on SQLite) writes each once, in order", async () => {
      const wq = await open();
      const q = queue();
      const results = await wq.enqueueBulk(
        q,
        Array.from({ length: 2_500 }, (_, i) => ({ name: "many", data: { i } })),
      );
      const rows = await rowsOf(q);
      expect(rows).toHaveLength(2_500);
      expect(rows.map((row) => JSON.parse(String(row.data)).i)).toEqual(Array.from({ length: 2_500 }, (_, i) => i));
      expect(results.map((result) => result.job.id)).toEqual(rows.map((row) => String(row.id)));
    });

    it("import() answers each job as the rows hold it (held), skipped ones as they were, and a unique key of another job writes nothing", async () => {
      const wq = await open();
      const source = queue();
      const target = queue();
      await wq.enqueueBulk(source, [
        { name: "one", data: { n: 1 }, priority: 3 },
        { name: "two", data: [1, 2], tags: ["t"] },
      ]);
      const exported = (await wq.export(source)).items;
      await wq.import(target, exported.slice(0, 1));
      const result = await wq.import(target, exported);
      expect(result).toMatchObject({ imported: 1, skipped: [exported[0]?.id] });
      // Where the store cannot answer it in the writing call (MySQL, no INSERT ... RETURNING), there is no held.
      if (result.held) {
        const read = await wq.getMany?.(
          target,
          exported.map((job) => job.id),
        );
        const checked = ({ id, name, data, state, priority, attempts, runAt, createdAt }: Job) => ({
          id,
          name,
          data,
          state,
          priority,
          attempts,
          runAt,
          createdAt,
        });
        expect(result.held).toEqual(read?.map((job) => checked(job as Job)));
        expect(result.held.map((job) => job?.priority)).toEqual([3, 0]);
      }
      const clash: Job = { ...(exported[1] as Job), id: "another", uniqueKey: "taken" };
      await wq.enqueue(target, { name: "holder", uniqueKey: "taken" });
      const before = (await rowsOf(target)).length;
      await expect(wq.import(target, [{ ...clash, id: "fresh" }, clash])).rejects.toMatchObject({ code: "CONFLICT" });
      expect(await rowsOf(target)).toHaveLength(before);
    });

    it("reserve() on a paused queue takes nothing, and a claim of several hands out the best first", async () => {
      const wq = await open();
      const q = queue();
      await wq.enqueueBulk(q, [
        { name: "low", priority: 1 },
        { name: "high", priority: 5 },
        { name: "low too", priority: 1 },
      ]);
      await wq.pause(q);
      expect(await wq.reserve(q, { worker: "w", count: 3 })).toEqual([]);
      expect((await rowsOf(q)).map((row) => row.status)).toEqual(["pending", "pending", "pending"]);
      await wq.resume(q);
      const taken = await wq.reserve(q, { worker: "w", count: 2 });
      expect(taken.map((job) => job.name)).toEqual(["high", "low"]);
      expect((await rowsOf(q)).map((row) => row.status)).toEqual(["processing", "processing", "pending"]);
    });

    it("complete() of a job another worker holds is refused and leaves the row as it was", async () => {
      const wq = await open();
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "held" });
      await wq.reserve(q, { worker: "owner" });
      const before = await db(table).where("id", Number(job.id)).first();
      await expect(wq.complete(q, job.id, { worker: "intruder" })).rejects.toMatchObject({ code: "LEASE_LOST" });
      expect(await db(table).where("id", Number(job.id)).first()).toEqual(before);
      await expect(wq.heartbeat(q, job.id, { worker: "intruder" })).rejects.toMatchObject({ code: "LEASE_LOST" });
      expect((await wq.complete(q, job.id, { worker: "owner" })).state).toBe("completed");
    });

    it("completeAndReserve() writes the completion and the next claim as complete() and reserve() do; a paused queue gives no next", async () => {
      const wq = await open();
      const q = queue();
      const [first, second, third] = await wq.enqueueBulk(q, [{ name: "first" }, { name: "second" }, { name: "third" }]);
      await wq.reserve(q, { worker: "w", leaseMs: 1 });
      // The first job's lease has run out: still, its own completion never hands it out again.
      await new Promise((resolve) => setTimeout(resolve, 5));
      const { completed, next } = await completeAndReserve(wq, q, first?.job.id as string, { worker: "w", result: 1 }, { worker: "w" });
      expect([completed.id, completed.state, next.map((job) => job.id)]).toEqual([first?.job.id, "completed", [second?.job.id]]);
      const rows = await rowsOf(q);
      expect(rows.map((row) => [row.status, row.locked_queue_id === "" ? "" : "locked", row.sy_worker, row.sy_result])).toEqual([
        ["complete", "", null, "1"],
        ["processing", "locked", "w", null],
        ["pending", "", null, null],
      ]);
      expect(Number(rows[0]?.duration)).toBe(0);
      await wq.pause(q);
      const paused = await completeAndReserve(wq, q, second?.job.id as string, { worker: "w" }, { worker: "w" });
      expect([paused.completed.state, paused.next]).toEqual(["completed", []]);
      expect((await db(table).where("id", Number(third?.job.id)).first()).status).toBe("pending");
    });

    it("50 enqueues at once (one burst: a transaction on SQLite, one INSERT ... RETURNING on PostgreSQL and MariaDB) are each stored once and answered with their own row", async () => {
      // On MariaDB the backend runs on a knex of the test's own, whose query events show each statement it sends.
      const watched = dialect === "mysql" ? rawKnex(url) : undefined;
      const inserts: string[] = [];
      watched?.on("query", (query: { sql: string }) => {
        if (/^\s*insert/i.test(query.sql)) inserts.push(query.sql);
      });
      const wq = await open(watched ? { knex: watched } : {});
      const q = queue();
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => wq.enqueue(q, { name: "burst", data: { i } })));
      const rows = await rowsOf(q);
      expect(rows).toHaveLength(50);
      const byId = new Map(rows.map((row) => [String(row.id), JSON.parse(String(row.data)).i]));
      expect(results.map((result) => byId.get(result.job.id))).toEqual(Array.from({ length: 50 }, (_, i) => i));
      expect(results.every((result) => result.created && result.job.state === "waiting")).toBe(true);
      if (dialect === "postgres") {
        // One multi-row insert: every row was written by the same transaction.
        const writers = await db(table).where("sy_queue", q).distinct(db.raw("xmin::text as xmin"));
        expect(writers).toHaveLength(1);
      }
      if (watched) {
        await wq.close();
        await watched.destroy();
        expect(inserts).toHaveLength(1);
        expect(inserts[0]).toMatch(/returning \*$/i);
      }
    });

    it("enqueues with ids at once (one burst on SQLite and MariaDB, one group on PostgreSQL): a held id answers its job, an id repeated in the burst its first caller's, a numeric id the ordinary path", async () => {
      const counted = rawKnex(url);
      const ran: RanStatement[] = [];
      if (dialect === "sqlite") await recordSqliteStatements(counted, ran);
      const inserts: string[] = [];
      counted.on("query", (query: { sql: string }) => {
        if (/^\s*insert/i.test(query.sql)) inserts.push(query.sql);
      });
      const wq = createWorkerQueueBackend({ knex: counted, table });
      try {
        const q = queue();
        const { job: held } = await wq.enqueue(q, { name: "held", id: "jid-held" });
        const names = ["fresh", "again", "repeat of fresh", "numeric", "plain"];
        const ids = ["jid-fresh", "jid-held", "jid-fresh", "424242", undefined];
        const transactionsBefore = ran.filter((statement) => statement.sql === "begin immediate").length;
        const insertsBefore = inserts.length;
        const results = await Promise.all(names.map((name, i) => wq.enqueue(q, { name, ...(ids[i] ? { id: ids[i] } : {}) })));
        // The bursts and PostgreSQL's group of ids write in call order: the first caller of an id creates it.
        const freshBy = "fresh";
        expect(results.map((result) => [result.job.name, result.job.id, result.created])).toEqual([
          [freshBy, "jid-fresh", freshBy === "fresh"],
          ["held", held.id, false],
          [freshBy, "jid-fresh", freshBy !== "fresh"],
          ["numeric", "424242", true],
          ["plain", results[4]?.job.id, true],
        ]);
        // Each stored once (concurrent enqueues: in no promised order).
        const rows = await rowsOf(q);
        expect(rows.map((row) => [row.name, row.sy_job_id]).sort()).toEqual(
          [
            [freshBy, "jid-fresh"],
            ["held", "jid-held"],
            ["numeric", "424242"],
            ["plain", null],
          ].sort(),
        );
        if (dialect === "sqlite") {
          // The ids and the plain job in one transaction; the numeric id alone, the ordinary way.
          expect(ran.filter((statement) => statement.sql === "begin immediate").length - transactionsBefore).toBe(1);
        }
        if (dialect === "mysql") {
          // The ids and the plain job in one INSERT ... RETURNING (their look-ups one script before it); the numeric id its own.
          expect(inserts.length - insertsBefore).toBe(2);
        }
      } finally {
        await wq.close();
        await counted.destroy();
      }
    });

    it("a burst in which the table refuses one job (a CHECK of the user's) refuses that job alone and stores each other one once", async () => {
      const wq = await open();
      const q = queue();
      const refusedName = "refused by the table";
      if (dialect === "sqlite") {
        await db.raw(
          `create trigger if not exists ${table}_refuse before insert on ${table} when new.name = '${refusedName}' begin select raise(abort, 'refused'); end`,
        );
      } else {
        await db.raw(`alter table ${table} add constraint ${table}_refuse check (name <> '${refusedName}')`);
      }
      const names = Array.from({ length: 20 }, (_, i) => (i === 7 ? refusedName : `job ${i}`));
      const settled = await Promise.allSettled(names.map((name) => wq.enqueue(q, { name })));
      expect(settled.flatMap((outcome, i) => (outcome.status === "rejected" ? [i] : []))).toEqual([7]);
      // Written again one by one, concurrently: the others are each stored once, in no promised order.
      const stored = (await rowsOf(q)).map((row): [string, string] => [String(row.id), String(row.name)]);
      const answered = settled.flatMap(
        (outcome): Array<[string, string]> => (outcome.status === "fulfilled" ? [[outcome.value.job.id, outcome.value.job.name]] : []),
      );
      expect(answered.map(([, name]) => name)).toEqual(names.filter((_, i) => i !== 7));
      expect(new Map(stored)).toEqual(new Map(answered));
    });
  });
}
