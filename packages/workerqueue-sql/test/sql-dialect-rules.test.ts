import { type Backend, type Job, ValidationError, encodeCursor } from "@switchyard/core";
import type { Knex } from "knex";
import { describe, expect, it } from "vitest";
import { createWorkerQueueBackend } from "../src/index.js";
import { queueNamesTable } from "../src/lookup.js";
import type { Store } from "../src/options.js";
import {
  DIALECTS,
  type RanStatement,
  legacyDdl,
  randomTable,
  rawKnex,
  recordSqliteStatements,
  rjqueueDdl,
  useDialectTable,
} from "./dialects.js";

/** What the SQL dialects and legacy table layouts need beyond the contract: bindings, claim indexes, refused values, legacy markers. */
for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): dialect and legacy-table rules`, () => {
    const { url, table, db, open, row, queue: nextQueue } = useDialectTable(dialect, "wq_rv");
    const queue = () => nextQueue("rv");

    it("a queue name with ? is reserved, and a worker name with quotes, ?? and $1 is stored as given", async () => {
      const wq = await open();
      const q = `${queue()}a?b`;
      const { job } = await wq.enqueue(q, { name: "odd" });
      const worker = "it's ?? $1 ?";
      const [reserved] = await wq.reserve(q, { worker });
      expect(reserved?.id).toBe(job.id);
      expect(reserved?.lease?.worker).toBe(worker);
      expect((await row(job.id)).sy_worker).toBe(worker);
    });

    it("10 concurrent reserve(count: 1) on 10 backends, with 40 jobs waiting, each get a job", async () => {
      const producer = await open();
      const q = queue();
      await producer.enqueueBulk(
        q,
        Array.from({ length: 40 }, (_, i) => ({ name: `job-${i}`, priority: i % 3 })),
      );
      const reservers = await Promise.all(Array.from({ length: 10 }, () => open()));
      const got = await Promise.all(reservers.map((wq, i) => wq.reserve(q, { worker: `w${i}`, count: 1 })));
      expect(got.map((jobs) => jobs.length)).toEqual(Array(10).fill(1));
      expect(new Set(got.flat().map((job) => job.id)).size).toBe(10);
    });

    it("expired leases are taken in claim order (priority, then id) across the held statuses", async () => {
      const wq = await open();
      const q = queue();
      const held = (name: string, status: string, priority: number) => ({
        name,
        status,
        locked_queue_id: `sy:${name}`,
        attempts: 1,
        sy_queue: q,
        sy_priority: priority,
        sy_worker: "gone",
        sy_lease_until: 1,
      });
      await db(table).insert([held("loading", "loading", 1), held("mid", "processing", 3), held("high", "processing", 5)]);
      const reserved = await wq.reserve(q, { worker: "w", count: 2 });
      expect(await Promise.all(reserved.map(async (job) => (await row(job.id)).name))).toEqual(["high", "mid"]);
    });

    it("the default queue (legacy rows without sy_queue too) is reserved concurrently without empty answers", async () => {
      const q = queue();
      const producer = await open({ defaultQueue: q });
      await producer.enqueueBulk(
        q,
        Array.from({ length: 10 }, (_, i) => ({ name: `job-${i}` })),
      );
      await db(table).insert(
        Array.from({ length: 10 }, (_, i) => ({ name: `legacy-${i}`, status: "pending", locked_queue_id: "", attempts: 0 })),
      );
      const reservers = await Promise.all(Array.from({ length: 6 }, () => open({ defaultQueue: q })));
      const got = await Promise.all(reservers.map((wq, i) => wq.reserve(q, { worker: `w${i}`, count: 1 })));
      expect(got.map((jobs) => jobs.length)).toEqual(Array(6).fill(1));
      expect(new Set(got.flat().map((job) => job.id)).size).toBe(6);
    });

    it("ready() adds the claim-order index (sy_queue, status, sy_priority desc, id) to a legacy table, idempotently", async () => {
      const legacy = randomTable("wq_rv_legacy");
      await db.raw(legacyDdl(dialect, legacy));
      try {
        for (let i = 0; i < 2; i++) {
          const wq = createWorkerQueueBackend({ url, table: legacy });
          await wq.ready();
          await wq.close();
        }
        const name = `${legacy}_sy_claim_idx`;
        if (dialect === "postgres") {
          const { rows } = await db.raw("select indexdef from pg_indexes where indexname = ?", [name]);
          expect(String(rows[0]?.indexdef)).toMatch(/\(sy_queue, status, sy_priority DESC, id\)/);
        } else if (dialect === "mysql") {
          const [rows] = await db.raw(
            "select column_name as c, collation as o from information_schema.statistics where table_schema = database() and index_name = ? order by seq_in_index",
            [name],
          );
          expect(rows.map((r: { c: string; o: string }) => `${r.c}:${r.o}`)).toEqual(["sy_queue:A", "status:A", "sy_priority:D", "id:A"]);
        } else {
          const rows = await db.raw("select sql from sqlite_master where name = ?", [name]);
          expect(String(rows[0]?.sql)).toMatch(/`?sy_priority`? desc/i);
        }
      } finally {
        await db.schema.dropTableIfExists(legacy);
        await db.schema.dropTableIfExists(`${legacy}_paused_queues`);
        await db.schema.dropTableIfExists(`${legacy}_sy_recurring`);
      }
    });

    it("a unique key is free again once its job finished (complete, fail for good, cancel); the finished row keeps it as its record", async () => {
      const wq = await open();
      const q = queue();
      const { job: first } = await wq.enqueue(q, { name: "u", uniqueKey: "k", maxAttempts: 1 });
      const again = await wq.enqueue(q, { name: "u", uniqueKey: "k" });
      expect(again).toMatchObject({ created: false, job: { id: first.id } });
      await wq.reserve(q, { worker: "w" });
      await wq.complete(q, first.id, { worker: "w" });
      const second = await wq.enqueue(q, { name: "u", uniqueKey: "k", maxAttempts: 1 });
      expect(second.created).toBe(true);
      expect(second.job.id).not.toBe(first.id);
      expect(await row(first.id)).toMatchObject({ sy_unique_key: "k", sy_unique_slot: null });
      expect((await wq.get(q, first.id))?.uniqueKey).toBe("k");
      await wq.reserve(q, { worker: "w" });
      await wq.fail(q, second.job.id, { worker: "w", error: { message: "gone" } });
      const third = await wq.enqueue(q, { name: "u", uniqueKey: "k" });
      expect(third.created).toBe(true);
      await wq.cancel(q, third.job.id);
      const fourth = await wq.enqueue(q, { name: "u", uniqueKey: "k" });
      expect(fourth.created).toBe(true);
      expect(await row(fourth.job.id)).toMatchObject({ sy_unique_key: "k", sy_unique_slot: "k" });
      expect(new Set([first.id, second.job.id, third.job.id, fourth.job.id]).size).toBe(4);
    });

    it("a unique key is free again once a legacy daemon finished its job (status written directly)", async () => {
      const wq = await open();
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "u", uniqueKey: "legacy" });
      await db(table).where("id", Number(job.id)).update({ status: "complete", locked_queue_id: "" });
      const next = await wq.enqueue(q, { name: "u", uniqueKey: "legacy" });
      expect(next.created).toBe(true);
      expect(await row(job.id)).toMatchObject({ status: "complete", sy_unique_key: "legacy", sy_unique_slot: null });
    });

    it("import of a finished job and a newer waiting job with the same unique key writes both", async () => {
      const source = await open();
      const from = queue();
      const { job: old } = await source.enqueue(from, { name: "u", uniqueKey: "same" });
      await source.reserve(from, { worker: "w" });
      await source.complete(from, old.id, { worker: "w" });
      const { job: fresh } = await source.enqueue(from, { name: "u", uniqueKey: "same" });
      const exported = (await source.export(from, {})).items as Job[];
      expect(exported.map((job) => job.id).sort()).toEqual([old.id, fresh.id].sort());
      const to = queue();
      expect(await source.import(to, exported)).toMatchObject({ imported: 2, skipped: [] });
      expect((await source.get(to, fresh.id))?.state).toBe("waiting");
      expect((await source.enqueue(to, { name: "u", uniqueKey: "same" })).job.id).toBe(fresh.id);
    });

    it("ready() on a table with the old unique index on sy_unique_key moves the key of unfinished jobs into sy_unique_slot", async () => {
      const older = randomTable("wq_rv_old");
      const wq = createWorkerQueueBackend({ url, table: older });
      try {
        await wq.ready();
        const q = queue();
        const { job: held } = await wq.enqueue(q, { name: "u", uniqueKey: "held" });
        const { job: done } = await wq.enqueue(q, { name: "u", uniqueKey: "done" });
        await wq.cancel(q, done.id);
        // The layout as it was: no slot values, the unique index on the key itself.
        await db.schema.alterTable(older, (t) => t.dropUnique(["sy_queue", "sy_unique_slot"], `${older}_sy_unique_slot_uq`));
        await db(older).update({ sy_unique_slot: null });
        await db.schema.alterTable(older, (t) => t.unique(["sy_queue", "sy_unique_key"], { indexName: `${older}_sy_unique_key_uq` }));
        const migrated = createWorkerQueueBackend({ url, table: older });
        await migrated.ready();
        expect(await migrated.enqueue(q, { name: "u", uniqueKey: "held" })).toMatchObject({ created: false, job: { id: held.id } });
        expect((await migrated.enqueue(q, { name: "u", uniqueKey: "done" })).created).toBe(true);
        await migrated.close();
      } finally {
        await wq.close();
        await db.schema.dropTableIfExists(older);
        await db.schema.dropTableIfExists(`${older}_paused_queues`);
        await db.schema.dropTableIfExists(`${older}_sy_recurring`);
      }
    });

    it("values the database would refuse are ValidationErrors, and nothing of the call is written", async () => {
      const wq = await open();
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "template" });
      const model = (await wq.get(q, job.id)) as Job;
      const count = async () => Number((await db(table).where("sy_queue", q).count({ n: "*" }))[0]?.n);
      // An id of 256 characters (the column holds 255), in a batch with a good job: none is written.
      await expect(
        wq.import(q, [
          { ...model, id: "ok-1" },
          { ...model, id: "x".repeat(256) },
        ]),
      ).rejects.toBeInstanceOf(ValidationError);
      // taskable_id is a 32-bit int column.
      await expect(wq.enqueue(q, { name: "t", native: { workerqueue: { taskable_id: 2 ** 31 } } })).rejects.toBeInstanceOf(ValidationError);
      await expect(wq.enqueue(q, { name: "t", native: { workerqueue: { taskable_id: -(2 ** 31) - 1 } } })).rejects.toBeInstanceOf(
        ValidationError,
      );
      // A runAt no bigint holds.
      await expect(wq.enqueue(q, { name: "t", runAt: 1e300 })).rejects.toBeInstanceOf(ValidationError);
      // A cursor that is not a safe non-negative integer position.
      await expect(wq.list(q, { state: "waiting", cursor: encodeCursor({ after: 1.5 }) })).rejects.toBeInstanceOf(ValidationError);
      await expect(wq.export(q, { cursor: encodeCursor({ after: -1 }) })).rejects.toBeInstanceOf(ValidationError);
      expect(await count()).toBe(1);
      if (dialect === "postgres") {
        // PostgreSQL text cannot hold NUL (22021): in a queue name, a job name, an id, a unique key.
        await expect(wq.enqueue(`${q}\u0000`, { name: "t" })).rejects.toBeInstanceOf(ValidationError);
        await expect(wq.enqueue(q, { name: "t\u0000" })).rejects.toBeInstanceOf(ValidationError);
        await expect(wq.enqueue(q, { name: "t", id: "a\u0000b" })).rejects.toBeInstanceOf(ValidationError);
        await expect(wq.enqueue(q, { name: "t", uniqueKey: "a\u0000b" })).rejects.toBeInstanceOf(ValidationError);
        await expect(wq.get(q, "a\u0000b")).rejects.toBeInstanceOf(ValidationError);
        expect(await count()).toBe(1);
      }
      // Both ends of the 32-bit taskable_id column are kept.
      for (const taskable_id of [-(2 ** 31), 2 ** 31 - 1]) {
        const { job } = await wq.enqueue(q, { name: "t", native: { workerqueue: { taskable_id } } });
        expect(((await wq.get(q, job.id))?.native.workerqueue as { taskable_id?: number }).taskable_id).toBe(taskable_id);
      }
    });

    it("an unbounded retryDelay or an exponential backoff past any bigint is capped, and the job retries later", async () => {
      const wq = await open();
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "t", maxAttempts: 5, backoff: { type: "exponential", delay: 31_536_000_000 } });
      await wq.reserve(q, { worker: "w" });
      const retried = await wq.fail(q, job.id, { worker: "w", error: { message: "x" }, retryDelay: Number.MAX_VALUE });
      expect(retried.state).toBe("delayed");
      expect(Number.isSafeInteger(retried.runAt)).toBe(true);
      // Due again at once (so the backoff applies next), then exponential backoffs past any bigint.
      await db(table)
        .where("id", Number(job.id))
        .update({ sy_run_at: Date.now() - 1, locked_queue_id: "" });
      await wq.reserve(q, { worker: "w" });
      for (let i = 0; i < 2; i++) {
        await db(table)
          .where("id", Number(job.id))
          .update({ attempts: 1000 + i, sy_max_attempts: 5000 });
        const again = await wq.fail(q, job.id, { worker: "w", error: { message: "x" } });
        expect(again.state).toBe("delayed");
        expect(Number.isSafeInteger(again.runAt)).toBe(true);
        await db(table)
          .where("id", Number(job.id))
          .update({ sy_run_at: Date.now() - 1, locked_queue_id: "" });
        await wq.reserve(q, { worker: "w" });
      }
    });

    it("a delayed row is not counted by workqd's idle poll (locked_queue_id=0 on MySQL), and rows with the old marker still work", async () => {
      const wq = await open();
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "later", delay: 60_000 });
      const marker = String((await row(job.id)).locked_queue_id);
      expect(marker).toBe(dialect === "mysql" ? "1:sy:delayed" : "sy:delayed");
      if (dialect === "mysql") {
        const [rows] = await db.raw(`select count(*) as n from ${table} where status='pending' and locked_queue_id=0 and sy_queue = ?`, [
          q,
        ]);
        expect(Number(rows[0].n)).toBe(0);
      }
      expect((await wq.get(q, job.id))?.state).toBe("delayed");
      // A row written with the other marker (the old one on MySQL) is delayed, then due and reserved.
      const other = marker === "sy:delayed" ? "1:sy:delayed" : "sy:delayed";
      await db(table).where("id", Number(job.id)).update({ locked_queue_id: other });
      expect((await wq.get(q, job.id))?.state).toBe("delayed");
      expect(await wq.reserve(q, { worker: "w" })).toEqual([]);
      await db(table)
        .where("id", Number(job.id))
        .update({ sy_run_at: Date.now() - 1 });
      const fresh = await open();
      expect((await fresh.reserve(`${q}-other`, { worker: "w" })).length).toBe(0);
      // The release of due delayed rows (for legacy daemons) clears the old marker too.
      expect((await row(job.id)).locked_queue_id).toBe("");
      expect((await fresh.reserve(q, { worker: "w" }))[0]?.id).toBe(job.id);
    });

    it("on an rjqueue table new rows are Ruby YAML with symbol keys unless dataFormat says otherwise", async () => {
      const rj = randomTable("wq_rv_rj");
      for (const sql of rjqueueDdl(dialect, rj)) await db.raw(sql);
      const opened: Backend[] = [];
      try {
        const byDefault = createWorkerQueueBackend({ url, table: rj });
        const asJson = createWorkerQueueBackend({ url, table: rj, dataFormat: "json" });
        opened.push(byDefault, asJson);
        const { job: yamlJob } = await byDefault.enqueue("default", { name: "Resize", data: { id: 5 } });
        const { job: jsonJob } = await asJson.enqueue("default", { name: "Resize", data: { id: 6 } });
        const dataOf = async (id: string) => String((await db(rj).where("id", Number(id)).first()).data);
        expect(await dataOf(yamlJob.id)).toMatch(/^--- \n:id: 5\n$/);
        expect(await dataOf(jsonJob.id)).toBe('{"id":6}');
        expect((await byDefault.get("default", yamlJob.id))?.data).toEqual({ id: 5 });
      } finally {
        await Promise.all(opened.map((b) => b.close()));
        await db.schema.dropTableIfExists(rj);
        await db.schema.dropTableIfExists(`${rj}_paused_queues`);
        await db.schema.dropTableIfExists(`${rj}_sy_recurring`);
      }
    });
  });
}

/**
 * SQLite reads a claim's lists in the claim index's order: the default queue's named rows and its
 * legacy rows without a name each by itself, since the OR of the two is read whole and sorted (10 ms a
 * claim at 100,000 pending legacy rows, growing with them). The plan is SQLite's own EXPLAIN QUERY PLAN
 * of the statement the reserve sent, on a table of the test's own.
 */
describe("workerqueue-sql (sqlite): the claim's plan", () => {
  const { url, table, db, open, row } = useDialectTable("sqlite", "wq_plan");

  it("reads the default queue's named and legacy rows each in the claim index, takes them in claim order across both", async () => {
    await open({ defaultQueue: "default" }); // creates the table
    const counted = rawKnex(url);
    const ran: RanStatement[] = [];
    await recordSqliteStatements(counted, ran);
    const wq = createWorkerQueueBackend({ knex: counted, table, defaultQueue: "default" });
    try {
      await db(table).insert(Array.from({ length: 500 }, (_, i) => ({ name: `legacy-${i}`, status: "pending", locked_queue_id: "" })));
      await wq.enqueueBulk(
        "default",
        Array.from({ length: 500 }, (_, i) => ({ name: `named-${i}` })),
      );
      await db.raw("analyze");
      ran.length = 0;
      const reserved = await wq.reserve("default", { worker: "w", count: 2 });
      // Claim order (priority, then id) across both: the oldest legacy rows first.
      expect(await Promise.all(reserved.map(async (job) => (await row(job.id)).name))).toEqual(["legacy-0", "legacy-1"]);
      // The claim's statements (sqlite-cycle.ts: the look for a pause or an expired lease, the due
      // rows, the UPDATE of those; and the release of due delayed rows for legacy daemons, once a
      // second): every read of the table looks up a key of an index, none reads the queue whole.
      const reads: string[] = [];
      for (const statement of ran.filter((ran) => ran.sql.includes(table))) {
        const plan = (await db.raw(`explain query plan ${statement.sql}`, statement.bindings as Knex.RawBinding[])) as Array<{
          detail: string;
        }>;
        reads.push(...plan.map((line) => line.detail).filter((line) => new RegExp(`^(SCAN|SEARCH) ${table}\\b`).test(line)));
      }
      // Expired leases in each held status and due rows, each for both spellings of the queue, and the claimed rows by id.
      expect(reads.length).toBeGreaterThanOrEqual(7);
      const byKey =
        /^SEARCH \S+ USING (INDEX \S+_(sy_claim|sy_queue_status)_idx \(sy_queue(=\?| IS \?) AND status=\?|INDEX \S+_status_locked_idx \(status=\? AND locked_queue_id=\?|INTEGER PRIMARY KEY \(rowid)/;
      expect(reads.filter((line) => !byKey.test(line))).toEqual([]);
    } finally {
      await wq.close();
      await counted.destroy();
    }
  });
});

/**
 * A job is found by index lookups, not by reading its queue: by its caller-chosen id in the
 * (sy_queue, sy_job_id) index for each spelling of the queue, else by its row id. The OR of the two
 * under the queue's condition was read by SQLite through every row of the queue (0.5 ms a completion
 * at 10,000 jobs, and HTTP reserve + complete at 100,000 jobs in the queue 187 jobs/s; 813 now).
 */
describe("workerqueue-sql (sqlite): the plans of a get, a completion and a getMany", () => {
  const { url, table, db, open } = useDialectTable("sqlite", "wq_find_plan");

  it("find the job by index lookups, in the default queue and another, by row id and by caller-chosen id", async () => {
    await open({ defaultQueue: "default" }); // creates the table
    const counted = rawKnex(url);
    const sent: RanStatement[] = [];
    await recordSqliteStatements(counted, sent);
    const wq = createWorkerQueueBackend({ knex: counted, table, defaultQueue: "default" });
    try {
      for (const queue of ["default", "other"]) {
        await wq.enqueueBulk(
          queue,
          Array.from({ length: 500 }, (_, i) => ({ name: `job-${i}`, ...(i % 2 === 0 ? { id: `own-${i}` } : {}) })),
        );
      }
      await db.raw("analyze");
      for (const queue of ["default", "other"]) {
        const { job: byRowId } = await wq.enqueue(queue, { name: "plain" });
        for (const id of [byRowId.id, "own-2"]) {
          sent.length = 0;
          expect((await wq.get(queue, id))?.id).toBe(id);
          expect((await wq.getMany?.(queue, [id, "own-4"]))?.map((job) => job?.id)).toEqual([id, "own-4"]);
          const [held] = await wq.reserve(queue, { worker: "w" });
          expect((await wq.complete(queue, held!.id, { worker: "w" })).state).toBe("completed");
          // The get, the getMany and the completion: the statements that name the job.
          const finds = sent.filter((query) => query.sql.includes("sy_job_id"));
          const reads: string[] = [];
          for (const statement of finds) {
            const plan = (await db.raw(`explain query plan ${statement.sql}`, statement.bindings as Knex.RawBinding[])) as Array<{
              detail: string;
            }>;
            reads.push(...plan.map((line) => line.detail).filter((line) => new RegExp(`^(SCAN|SEARCH) ${table}\\b`).test(line)));
          }
          expect(finds).toHaveLength(3);
          // Every read of the table looks up a key: none scans it or searches it by the queue alone.
          const keyLookup =
            /\((rowid=\?|id=\?|sy_queue=\? AND sy_job_id=\?|sy_queue IS \? AND sy_job_id=\?|sy_queue=\? AND sy_job_id IN .*|sy_queue IS \? AND sy_job_id IN .*|rowid IN .*|id IN .*)\)$/;
          expect(reads.length).toBeGreaterThanOrEqual(finds.length);
          expect(reads.filter((line) => !keyLookup.test(line))).toEqual([]);
        }
      }
    } finally {
      await wq.close();
      await counted.destroy();
    }
  });
});

/**
 * The queue names (queues(), and every qless put's look-up of its jid) are read on MariaDB by a
 * loose scan of the queue index: one seek per queue. The recursive spelling PostgreSQL and SQLite
 * seek with made MariaDB read the whole index at each step (a qless put at 50 in flight on a table
 * of 20 queues: 103 puts/s).
 */
describe("workerqueue-sql (mysql): the plan of the queue names", () => {
  const { table, db, open } = useDialectTable("mysql", "wq_names_plan");

  it("reads the queue index by a loose scan, not every row", async () => {
    const wq = await open();
    for (let i = 0; i < 20; i++)
      await wq.enqueueBulk(
        `names-${i}`,
        Array.from({ length: 100 }, (_, n) => ({ name: `job-${n}` })),
      );
    await db.raw(`analyze table \`${table}\``);
    const statement = `${queueNamesTable({ table, dialect: "mysql" } as Store)} select name from names`;
    const [plan] = (await db.raw(`explain ${statement}`)) as [Array<{ table: string | null; Extra: string | null; type: string | null }>];
    const reads = plan.filter((line) => line.table === table);
    expect(reads.length).toBeGreaterThan(0);
    for (const line of reads) {
      expect(line.type).toBe("range");
      expect(line.Extra).toContain("Using index for group-by");
    }
    expect(await wq.queues()).toEqual(Array.from({ length: 20 }, (_, i) => `names-${i}`).sort());
  });
});
