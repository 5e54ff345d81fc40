import { type Backend, InvalidStateError, LeaseLostError, completeAndReserve } from "@switchyard/core";
import { afterAll, describe, expect, it } from "vitest";
import { createWorkerQueueBackend } from "../src/index.js";
import { resolveStore } from "../src/options.js";
import { detectLayout } from "../src/schema.js";
import { completeJob } from "../src/transitions.js";
import { type RanStatement, randomTable, rawKnex, recordSqliteStatements, useDialectTable } from "./dialects.js";

/**
 * Group claims: reserves, completions and complete-and-claims issued together go in one statement
 * of a queue on PostgreSQL (postgres-claim.ts), in one script of a queue on MariaDB
 * (mariadb-claim.ts), in one transaction of the turn's on SQLite (sqlite-cycle.ts). The rules a group must keep whatever its size: each job to exactly one caller,
 * in claim order (expired leases first, then priority, then id) dealt out in arrival order, each
 * caller with its own lock id, worker and lease, and a completion writing what complete()'s own
 * statement writes. Groups are counted at the backend's own connection (PostgreSQL and MariaDB: the
 * group statements or scripts knex sends, the latter known by their callers' slots; SQLite: the
 * transactions begun); rows are read with a connection of the test's own.
 */
for (const dialect of ["postgres", "mysql", "sqlite"] as const) {
  describe(`workerqueue-sql (${dialect}): group claims`, () => {
    const { url, table, db, open, queue, row } = useDialectTable(dialect, "wq_group");
    const counted = rawKnex(url);
    let groups = 0;
    const ran: RanStatement[] = [];
    // What only a group's statement (PostgreSQL) or script (MariaDB: its claim's slots, its completions' flags) holds.
    const groupMarks = dialect === "postgres" ? ["claimed as"] : ["as slots", "@sy_done_"];
    const counting =
      dialect === "sqlite"
        ? recordSqliteStatements(counted, ran)
        : Promise.resolve(
            counted.on("query", (query: { sql: string }) => {
              if (groupMarks.some((mark) => query.sql.includes(mark))) groups++;
            }),
          );
    const groupsSent = () => (dialect === "sqlite" ? ran.filter((statement) => statement.sql === "begin immediate").length : groups);
    const backends: Backend[] = [];
    afterAll(async () => {
      await Promise.all(backends.map((backend) => backend.close()));
      await counted.destroy();
    });
    /** A backend on the table whose group statements are counted; `clock` as the backend option. */
    const openCounted = async (clock?: () => number) => {
      await open(); // creates the table (and, on PostgreSQL, its trigger)
      await counting;
      const backend = createWorkerQueueBackend({ knex: counted, table, ...(clock ? { clock } : {}) });
      backends.push(backend);
      await backend.ready();
      return backend;
    };
    const pending = async (q: string) => (await db(table).where({ sy_queue: q, status: "pending" })).length;
    const statements = async <T>(work: () => Promise<T>): Promise<[T, number]> => {
      const before = groupsSent();
      const result = await work();
      return [result, groupsSent() - before];
    };

    it("reserves issued together share one statement, each job goes to one caller, dealt in claim order and arrival order", async () => {
      const wq = await openCounted();
      const q = queue();
      const { job: urgent } = await wq.enqueue(q, { name: "urgent", priority: 5 });
      const plain = await wq.enqueueBulk(
        q,
        Array.from({ length: 12 }, (_, i) => ({ name: `plain-${i}` })),
      );
      const counts = [1, 3, 1, 2, 1, 1];
      // A reserve frees due delayed rows first, at most once a second: done here, so that none of the
      // callers below waits for it and all arrive in the order called.
      await wq.reserve(queue(), { worker: "w" });
      const [answers, sent] = await statements(() =>
        Promise.all(counts.map((count, i) => wq.reserve(q, { worker: `w${i}`, count, leaseMs: 10_000 * (i + 1) }))),
      );
      expect(sent).toBe(1);
      // Claim order is priority then id; caller i takes the next counts[i] of it.
      const order = [urgent.id, ...plain.map((result) => result.job.id)];
      const expected = counts.map((count, i) => {
        const from = counts.slice(0, i).reduce((sum, n) => sum + n, 0);
        return order.slice(from, from + count);
      });
      expect(answers.map((jobs) => jobs.map((job) => job.id))).toEqual(expected);

      const rows = await db(table).where("sy_queue", q).whereIn("id", expected.flat().map(Number)).orderBy("id");
      expect(rows).toHaveLength(9);
      for (const [i, jobs] of answers.entries()) {
        const own = rows.filter((r) => jobs.some((job) => job.id === String(r.id)));
        expect(own.map((r) => [r.status, r.sy_worker, r.attempts])).toEqual(jobs.map(() => ["processing", `w${i}`, 1]));
        // One lock id per caller (a claim), never shared with another caller.
        expect(new Set(own.map((r) => r.locked_queue_id)).size).toBe(1);
        expect(Number(own[0]?.sy_lease_until) - Number(own[0]?.sy_started_ms)).toBe(10_000 * (i + 1));
      }
      expect(new Set(rows.map((r) => r.locked_queue_id)).size).toBe(counts.length);
      expect(await pending(q)).toBe(4);
    });

    it("forty racing reserves of twenty jobs from two backends (two gateways): each job handed out once, the rest get nothing", async () => {
      const wq = await openCounted();
      const other = await open();
      const q = queue();
      await wq.enqueueBulk(
        q,
        Array.from({ length: 20 }, (_, i) => ({ name: `j${i}` })),
      );
      // Groups of both backends, in several turns, run at once: SKIP LOCKED must keep them apart.
      const racers = Array.from({ length: 40 }, (_, i) =>
        new Promise((resolve) => setTimeout(resolve, i % 3)).then(() => (i % 2 ? wq : other).reserve(q, { worker: `r${i}` })),
      );
      const taken = (await Promise.all(racers)).flat().map((job) => job.id);
      expect(taken).toHaveLength(20);
      expect(new Set(taken).size).toBe(20);
      const rows = await db(table).where("sy_queue", q);
      expect(rows.every((r) => r.status === "processing" && r.attempts === 1)).toBe(true);
      expect(new Set(rows.map((r) => r.locked_queue_id)).size).toBe(20);
    });

    it("a group takes expired leases before due jobs, and answers each caller's expired ones first", async () => {
      let now = 1_000_000_000_000;
      const wq = await openCounted(() => now);
      const q = queue();
      const [a, b, c] = await wq.enqueueBulk(q, [{ name: "a" }, { name: "b" }, { name: "c", priority: 9 }]);
      await wq.reserve(q, { worker: "first", count: 2, leaseMs: 1_000 }); // c (priority) and a
      now += 5_000;
      const [answers, sent] = await statements(() =>
        Promise.all([wq.reserve(q, { worker: "x", count: 2 }), wq.reserve(q, { worker: "y", count: 2 })]),
      );
      expect(sent).toBe(1);
      // Expired c and a first, in claim order, then the due b.
      expect(answers.map((jobs) => jobs.map((job) => [job.id, job.attempts]))).toEqual([
        [
          [c?.job.id, 2],
          [a?.job.id, 2],
        ],
        [[b?.job.id, 1]],
      ]);
    });

    it("completions in a group write the row complete()'s own statement writes", async () => {
      let now = 1_100_000_000_000;
      const wq = await openCounted(() => now);
      const q = queue();
      await wq.enqueueBulk(q, [
        { name: "alone", uniqueKey: "k1" },
        { name: "grouped", uniqueKey: "k2" },
        { name: "grouped too", uniqueKey: "k3" },
      ]);
      const held = await wq.reserve(q, { worker: "w", count: 3 });
      const [alone, grouped, groupedToo] = held.map((job) => job.id) as [string, string, string];
      // The single-statement path (SQLite's, and PostgreSQL's before groups) as the reference.
      now += 2_400;
      const { store } = resolveStore({ knex: db, table, clock: () => now });
      await detectLayout(store);
      await completeJob(store, q, alone, { worker: "w", result: { ok: [1, "two"] } });
      const [, sent] = await statements(() =>
        Promise.all([wq.complete(q, grouped, { worker: "w", result: { ok: [1, "two"] } }), wq.complete(q, groupedToo, { worker: "w" })]),
      );
      expect(sent).toBe(1);
      const strip = ({ id, name, data, sy_unique_key, created_at, sy_created_ms, ...rest }: Record<string, unknown>) => rest;
      const [expected, actual, noResult] = [strip(await row(alone)), strip(await row(grouped)), strip(await row(groupedToo))];
      expect(actual).toEqual(expected);
      expect(expected).toMatchObject({ status: "complete", locked_queue_id: "", sy_worker: null, sy_unique_slot: null, duration: 2 });
      // No result given: the row keeps none rather than the text "null".
      expect(noResult.sy_result).toBeNull();
    });

    it("one job completed twice at once completes once; the second call is refused", async () => {
      const wq = await openCounted();
      const q = queue();
      await wq.enqueue(q, { name: "once" });
      const [job] = await wq.reserve(q, { worker: "w" });
      const outcomes = await Promise.allSettled([wq.complete(q, job!.id, { worker: "w" }), wq.complete(q, job!.id, { worker: "w" })]);
      expect(outcomes.map((outcome) => outcome.status).sort()).toEqual(["fulfilled", "rejected"]);
      const refused = outcomes.find((outcome) => outcome.status === "rejected") as PromiseRejectedResult;
      expect(refused.reason).toBeInstanceOf(InvalidStateError);
      expect(await row(job!.id)).toMatchObject({ status: "complete", attempts: 1 });
    });

    it("complete-and-claims of one queue share a statement: each completes its own job and gets a job no other caller got", async () => {
      const wq = await openCounted();
      const q = queue();
      await wq.enqueueBulk(
        q,
        Array.from({ length: 16 }, (_, i) => ({ name: `c${i}` })),
      );
      const held = await Promise.all(Array.from({ length: 6 }, (_, i) => wq.reserve(q, { worker: `w${i}` })));
      const heldIds = held.map(([job]) => job!.id);
      // One caller names the wrong worker: refused alone (as complete() refuses it), and it claims nothing.
      const [outcomes, sent] = await statements(() =>
        Promise.allSettled(
          heldIds.map((id, i) => completeAndReserve(wq, q, id, { worker: i === 2 ? "intruder" : `w${i}` }, { worker: `w${i}` })),
        ),
      );
      expect(sent).toBe(1);
      expect((outcomes[2] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
      const done = outcomes.filter((o) => o.status === "fulfilled").map((o) => o.value);
      expect(done.map((d) => d.completed.id)).toEqual(heldIds.filter((_, i) => i !== 2));
      const next = done.flatMap((d) => d.next.map((job) => job.id));
      expect(next).toHaveLength(5);
      expect(new Set([...next, ...heldIds]).size).toBe(11);
      const rows = await db(table).where("sy_queue", q);
      expect(rows.filter((r) => r.status === "complete")).toHaveLength(5);
      // The refused caller's job is still held by its worker; five next jobs and it are processing.
      expect(
        rows
          .filter((r) => r.status === "processing")
          .map((r) => String(r.id))
          .sort(),
      ).toEqual([...next, heldIds[2]].sort());
    });

    it("a paused queue: a group claims nothing and its completions still complete", async () => {
      const wq = await openCounted();
      const q = queue();
      await wq.enqueueBulk(q, [{ name: "a" }, { name: "b" }, { name: "c" }]);
      const [job] = await wq.reserve(q, { worker: "w" });
      await wq.pause(q);
      const [both, reserved] = await Promise.all([
        completeAndReserve(wq, q, job!.id, { worker: "w" }, { worker: "w" }),
        wq.reserve(q, { worker: "v", count: 2 }),
      ]);
      expect(both.completed.state).toBe("completed");
      expect(both.next).toEqual([]);
      expect(reserved).toEqual([]);
      expect(await pending(q)).toBe(2);
    });

    it.runIf(dialect === "sqlite")(
      "a lease that runs out within the group's span is taken by a later caller of the group, as one call after another would",
      async () => {
        let calls = 0;
        // Each call reads a clock 10 ms later than the one before.
        const wq = await openCounted(() => 1_200_000_000_000 + 10 * calls++);
        const q = queue();
        const [a, b] = await wq.enqueueBulk(q, [{ name: "a" }, { name: "b" }]);
        await wq.reserve(queue(), { worker: "w" }); // the once-a-second release of delayed rows, done here
        const [answers, sent] = await statements(() =>
          Promise.all([wq.reserve(q, { worker: "brief", leaseMs: 1 }), wq.reserve(q, { worker: "later" })]),
        );
        expect(sent).toBe(1);
        // "brief" took a, whose lease had ended when "later" asked: "later" takes it again, not b.
        expect(answers.map((jobs) => jobs.map((job) => [job.id, job.attempts]))).toEqual([[[a?.job.id, 1]], [[a?.job.id, 2]]]);
        expect(await row(b?.job.id as string)).toMatchObject({ status: "pending" });
      },
    );

    it.runIf(dialect !== "postgres")(
      "a group the database refuses in part is undone whole, and each caller is then answered alone: the refused one with its error, the others with their jobs",
      async () => {
        const wq = await openCounted();
        const q = queue();
        await wq.enqueueBulk(
          q,
          Array.from({ length: 6 }, (_, i) => ({ name: `j${i}` })),
        );
        await db.raw(
          dialect === "sqlite"
            ? `create trigger ${table}_refuse_worker before update on ${table} when new.sy_worker = 'refused' begin select raise(abort, 'refused'); end`
            : `create trigger ${table}_refuse_worker before update on ${table} for each row begin
                 if new.sy_worker = 'refused' then signal sqlstate '45000' set message_text = 'refused'; end if; end`,
        );
        try {
          await wq.reserve(queue(), { worker: "w" }); // the once-a-second release of delayed rows, done here
          const [outcomes, sent] = await statements(() =>
            Promise.allSettled(["w0", "refused", "w2"].map((worker) => wq.reserve(q, { worker, count: 2 }))),
          );
          // The group, then (MariaDB) each caller alone in a script of its own; SQLite's callers alone begin none.
          expect(sent).toBe(dialect === "sqlite" ? 1 : 4);
          expect(outcomes.map((outcome) => outcome.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
          const taken = outcomes.flatMap((outcome) => (outcome.status === "fulfilled" ? outcome.value.map((job) => job.id) : []));
          expect(taken).toHaveLength(4);
          const rows = await db(table).where("sy_queue", q).orderBy("id");
          // Written once each, by the callers alone: nothing of the undone group stayed.
          expect(rows.filter((r) => r.status === "processing").map((r) => String(r.id))).toEqual(
            [...taken].sort((x, y) => Number(x) - Number(y)),
          );
          expect(rows.filter((r) => r.status === "processing").every((r) => r.attempts === 1 && r.sy_worker !== "refused")).toBe(true);
          expect(await pending(q)).toBe(2);
        } finally {
          await db.raw(`drop trigger ${table}_refuse_worker`);
        }
      },
    );

    /** The plan PostgreSQL makes for the claim statement a reserve of `q` sends (as sent: $1, $2...). */
    const claimPlan = async (wq: Backend, q: string, count = 1) => {
      let claim: { sql: string; bindings: unknown[] } | undefined;
      const capture = (query: { sql: string; bindings: unknown[] }) => {
        if (query.sql.includes("claimed as")) claim ??= query;
      };
      counted.on("query", capture);
      let reserved: Awaited<ReturnType<Backend["reserve"]>>;
      try {
        reserved = await wq.reserve(q, { worker: "w", count });
      } finally {
        counted.off("query", capture);
      }
      type Connection = { query(text: string, values: unknown[]): Promise<{ rows: Array<{ "QUERY PLAN": string }> }> };
      const connection = (await db.client.acquireConnection()) as Connection;
      const plan = await connection
        .query(`explain ${claim?.sql}`, claim?.bindings ?? [])
        .then((result) => result.rows.map((line) => line["QUERY PLAN"]).join("\n"))
        .finally(() => db.client.releaseConnection(connection));
      return { plan, reserved };
    };
    const jobs = (prefix: string) => Array.from({ length: 2_000 }, (_, i) => ({ name: `${prefix}-${i}` }));

    it.runIf(dialect === "postgres")(
      "reads the held jobs of a queue PostgreSQL has no statistics for in the claim index, not by every row of the queue",
      async () => {
        const wq = await openCounted();
        const [known, fresh] = [queue(), queue()];
        await wq.enqueueBulk(known, jobs("known"));
        await db.raw("analyze ??", [table]);
        // A queue the statistics do not know: PostgreSQL estimates it at one row.
        await wq.enqueueBulk(fresh, jobs("fresh"));
        const { plan } = await claimPlan(wq, fresh);
        expect(plan).toContain(`${table}_sy_claim_idx`);
        expect(plan).not.toContain(`${table}_sy_job_id_uq`);
      },
    );

    it.runIf(dialect === "postgres")(
      "on a table PostgreSQL has never analyzed (a migration's bulk load), reads the queue in the claim index's order, not every row of it sorted",
      async () => {
        const fresh = randomTable("wq_fresh");
        const wq = createWorkerQueueBackend({ knex: counted, table: fresh });
        backends.push(wq);
        try {
          await wq.ready();
          const q = queue();
          // Three priorities, as a real queue has: the highest first, then the oldest.
          for (let page = 0; page < 10; page++)
            await wq.enqueueBulk(
              q,
              jobs(`page${page}`).map((job, i) => ({ ...job, priority: i % 3 })),
            );
          const { plan, reserved } = await claimPlan(wq, q);
          expect(plan).toContain(`Index Scan using ${fresh}_sy_claim_idx`);
          // The index that matched the queue and status as well, read whole then sorted, is not made on PostgreSQL.
          expect(plan).not.toContain(`${fresh}_sy_queue_status_idx`);
          expect(reserved.map((job) => job.name)).toEqual(["page0-2"]);
          // A table an earlier version made has it: ready() drops it.
          await db.raw("create index ?? on ?? (sy_queue, status)", [`${fresh}_sy_queue_status_idx`, fresh]);
          const later = createWorkerQueueBackend({ knex: counted, table: fresh });
          backends.push(later);
          await later.ready();
          const indexes = await db.raw("select indexname from pg_indexes where tablename = ?", [fresh]);
          expect(indexes.rows.map((row: { indexname: string }) => row.indexname)).toEqual(
            expect.arrayContaining([`${fresh}_sy_claim_idx`, `${fresh}_status_locked_idx`]),
          );
          expect(indexes.rows.map((row: { indexname: string }) => row.indexname)).not.toContain(`${fresh}_sy_queue_status_idx`);
        } finally {
          await db.schema.dropTableIfExists(fresh);
          await db.schema.dropTableIfExists(`${fresh}_paused_queues`);
          await db.schema.dropTableIfExists(`${fresh}_sy_recurring`);
        }
      },
    );

    it.runIf(dialect === "postgres")(
      "reads the default queue's named and legacy rows each in the claim index, in claim order across both, sorting neither",
      async () => {
        const wq = await openCounted();
        const legacy = await db(table)
          .insert(Array.from({ length: 2_000 }, (_, i) => ({ name: `legacy-${i}`, status: "pending", locked_queue_id: "", attempts: 0 })))
          .returning("id");
        await wq.enqueueBulk("default", jobs("named"));
        await db.raw("analyze ??", [table]);
        const { plan, reserved } = await claimPlan(wq, "default", 3);
        expect(plan).toContain(`${table}_sy_claim_idx`);
        expect(plan).not.toMatch(new RegExp(`(Bitmap Heap|Seq) Scan on ${table}`));
        // Claim order (priority, then id) across both: the oldest legacy rows first.
        expect(reserved.map((job) => Number(job.id))).toEqual(legacy.slice(0, 3).map((row: { id: number }) => row.id));
      },
    );
  });
}
