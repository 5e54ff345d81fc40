import type { Backend } from "@switchyard/core";
import { createWorkerQueueBackend } from "@switchyard/workerqueue-sql";
import type { Knex } from "knex";
import { afterAll, describe, expect, it } from "vitest";
import {
  DIALECTS,
  legacyDdl,
  randomTable,
  rawKnex,
  removeSqliteFile,
  rjqueueDdl,
  urlFor,
} from "../packages/workerqueue-sql/test/dialects.js";
import { LegacySql, RjqueueSql, legacyLockId, rowsOf } from "../packages/workerqueue-sql/test/legacy-sql.js";

/**
 * The legacy Worker Queue programs (workq's C++ daemon, rjqueue, and their producers) share the
 * `jobs` table with Switchyard. Their SQL is replayed verbatim (see legacy-sql.ts) against the same
 * table the backend uses, on every dialect.
 */
for (const dialect of DIALECTS) {
  describe(`Worker Queue legacy interop (${dialect})`, () => {
    const url = urlFor(dialect);
    const db = rawKnex(url);
    const cleanups: Array<() => Promise<void>> = [];

    afterAll(async () => {
      for (const cleanup of cleanups) await cleanup();
      await db.destroy();
      removeSqliteFile(url);
    });

    /** A fresh table per test: the legacy claim takes rows of every queue, so tests must not share one. */
    async function setup(options: { legacyTable?: boolean; rjqueueTable?: boolean } = {}) {
      const table = randomTable("wq_legacy");
      if (options.legacyTable) await db.raw(legacyDdl(dialect, table));
      if (options.rjqueueTable) for (const statement of rjqueueDdl(dialect, table)) await db.raw(statement);
      const backends: Backend[] = [];
      const backend = async () => {
        const created = createWorkerQueueBackend({ url, table });
        backends.push(created);
        await created.ready();
        return created;
      };
      cleanups.push(async () => {
        await Promise.all(backends.map((b) => b.close()));
        await db.schema.dropTableIfExists(table);
        await db.schema.dropTableIfExists(`${table}_paused_queues`);
        await db.schema.dropTableIfExists(`${table}_sy_recurring`);
      });
      return { table, backend, legacy: new LegacySql(db, dialect, table) };
    }

    const rowOf = async (table: string, id: string | number) =>
      (await db(table).where("id", Number(id)).first()) as Record<string, unknown>;

    it("rows inserted the way workq and rjqueue producers insert them are reserved and completed through the backend, ending complete and unlocked", async () => {
      const { table, backend, legacy } = await setup({ legacyTable: false });
      const wq = await backend();
      await legacy.insertWorkq("magick", '{"original_filename":"a.png","operation":"resize","rows":64,"cols":64}');
      await legacy.insertRjqueue("image_thumb", "--- \n:id: 5\n:size: 64x32\n", 5, "Image");

      const jobs = await wq.reserve("default", { worker: "w", count: 5 });
      expect(jobs.map((j) => j.name)).toEqual(["magick", "image_thumb"]);
      expect(jobs[0]).toMatchObject({ data: { original_filename: "a.png", operation: "resize", rows: 64, cols: 64 }, attempts: 1 });
      expect(jobs[1]).toMatchObject({
        data: { id: 5, size: "64x32" },
        attempts: 1,
        native: { workerqueue: { taskable_id: 5, taskable_type: "Image" } },
      });
      expect(jobs.every((j) => j.createdAt > Date.now() - 3_600_000)).toBe(true);

      for (const job of jobs) await wq.complete("default", job.id, { worker: "w" });
      for (const job of jobs) {
        const row = await rowOf(table, job.id);
        expect(row).toMatchObject({ status: "complete", locked_queue_id: "", duration: 0 });
        expect(Number(row.attempts)).toBe(1);
      }
      // The YAML row stays YAML: an rjqueue reader still finds its symbol keys.
      expect((await rowOf(table, jobs[1]?.id ?? 0)).data).toBe("--- \n:id: 5\n:size: 64x32\n");
      expect((await wq.counts("default")).completed).toBe(2);
    });

    it("a job enqueued through the backend is claimed, read back and finished by the C++ worker's SQL, and the backend then sees it completed", async () => {
      const { table, backend, legacy } = await setup();
      const wq = await backend();
      const { job } = await wq.enqueue("default", { name: "magick", data: { operation: "resize", rows: 64 } });

      const lock = legacyLockId();
      await legacy.claim(lock, 4);
      const claimed = await legacy.claimed(lock, 4);
      expect(claimed).toHaveLength(1);
      expect(claimed[0]).toMatchObject({ id: Number(job.id), name: "magick" });
      expect(JSON.parse(claimed[0]?.data ?? "null")).toEqual({ operation: "resize", rows: 64 });

      // While the legacy daemon holds it, it is active with no Switchyard lease, and nobody else gets it.
      expect(await wq.get("default", job.id)).toMatchObject({ state: "active", lease: null });
      expect(await wq.reserve("default", { worker: "w", leaseMs: 1 })).toEqual([]);

      await legacy.startProcessing(Number(job.id));
      await legacy.finish(Number(job.id), "complete");
      expect(await wq.get("default", job.id)).toMatchObject({ state: "completed" });
      expect((await wq.counts("default")).completed).toBe(1);
      expect((await rowOf(table, job.id)).status).toBe("complete");
    });

    it("a legacy worker's error status reads as failed, with the job's details as its error", async () => {
      const { table, backend, legacy } = await setup();
      const wq = await backend();
      const { job } = await wq.enqueue("default", { name: "unknown_module" });
      const lock = legacyLockId();
      await legacy.claim(lock, 1);
      await legacy.finish(Number(job.id), "error");
      await db(table).where("id", Number(job.id)).update({ details: "no module unknown_module" });
      expect(await wq.get("default", job.id)).toMatchObject({ state: "failed", error: { message: "no module unknown_module" } });
    });

    it("the legacy claim never takes a delayed job early, and takes it once it is due and a reserve has released it", async () => {
      const { table, backend, legacy } = await setup();
      const wq = await backend();
      const { job } = await wq.enqueue("default", { name: "later", delay: 400 });
      const early = legacyLockId();
      await legacy.claim(early, 4);
      expect(await legacy.claimed(early, 4)).toEqual([]);
      expect((await rowOf(table, job.id)).status).toBe("pending");

      const deadline = Date.now() + 10_000;
      let taken: Array<{ id: number }> = [];
      while (taken.length === 0 && Date.now() < deadline) {
        // Any reserve (here on another queue) frees due delayed rows for legacy daemons.
        await wq.reserve("some-other-queue", { worker: "w" });
        const lock = legacyLockId();
        await legacy.claim(lock, 4);
        taken = await legacy.claimed(lock, 4);
        if (taken.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(Date.now()).toBeGreaterThanOrEqual(job.createdAt + 400);
      expect(taken.map((r) => r.id)).toEqual([Number(job.id)]);
    });

    it("a table created by `workqd --install-schema` gains the columns and index it lacks in ready(), and keeps its rows working", async () => {
      const { table, backend, legacy } = await setup({ legacyTable: true });
      await legacy.insertWorkq("run", '{"command":"/usr/bin/touch /tmp/x"}');
      const wq = await backend();
      const columns = Object.keys(await db(table).columnInfo());
      expect(columns).toEqual(expect.arrayContaining(["duration", "taskable_id", "taskable_type", "sy_queue", "sy_priority", "sy_run_at"]));
      expect(await indexNames(db, dialect, table)).toContain(`${table}_status_locked_idx`.toLowerCase());
      // ready() of a second backend on the completed table changes nothing and does not fail.
      await (await backend()).ready();

      const [job] = await wq.reserve("default", { worker: "w" });
      expect(job).toMatchObject({ name: "run", data: { command: "/usr/bin/touch /tmp/x" }, attempts: 1 });
      await wq.complete("default", job?.id ?? "", { worker: "w", result: { exit: 0 } });
      expect(await rowOf(table, job?.id ?? 0)).toMatchObject({ status: "complete", locked_queue_id: "" });

      const { job: fresh } = await wq.enqueue("default", { name: "run", data: { command: "true" } });
      const lock = legacyLockId();
      await legacy.claim(lock, 4);
      expect((await legacy.claimed(lock, 4)).map((r) => r.id)).toEqual([Number(fresh.id)]);
    });

    it("on rjqueue's table (boolean locked) neither side takes a row the other holds, and each sees the other's outcome", async () => {
      const { table, backend, legacy } = await setup({ rjqueueTable: true });
      const rjqueue = new RjqueueSql(db, dialect, table);
      await legacy.insertRjqueue("image_thumb", "--- \n:id: 1\n:size: 64x32\n", 1, "Image");
      const wq = await backend();
      expect(Object.keys(await db(table).columnInfo())).toContain("locked_queue_id");

      const [held] = await rjqueue.take(5);
      expect(held).toBeDefined();
      expect(await wq.get("default", String(held))).toMatchObject({ state: "active", lease: null });
      expect(await wq.reserve("default", { worker: "w" })).toEqual([]);

      await legacy.insertRjqueue("image_thumb", "--- \n:id: 2\n:size: 64x32\n", 2, "Image");
      const [mine] = await wq.reserve("default", { worker: "w" });
      expect(mine).toMatchObject({ data: { id: 2, size: "64x32" } });
      expect(Boolean(Number((await rowOf(table, mine?.id ?? 0)).locked))).toBe(true);
      const { job: delayed } = await wq.enqueue("default", { name: "later", delay: 60_000 });
      expect(await rjqueue.take(5)).toEqual([]);

      await rjqueue.startProcessing(held ?? 0);
      await rjqueue.finish(held ?? 0, "complete", 2);
      expect(await wq.get("default", String(held))).toMatchObject({ state: "completed" });
      await wq.complete("default", mine?.id ?? "", { worker: "w" });
      expect(await rowOf(table, mine?.id ?? 0)).toMatchObject({ status: "complete", locked_queue_id: "" });
      expect(Boolean(Number((await rowOf(table, mine?.id ?? 0)).locked))).toBe(false);
      expect(await wq.counts("default")).toMatchObject({ completed: 2, delayed: 1, active: 0, waiting: 0 });
      expect((await wq.list("default", { state: "delayed" })).items.map((j) => j.id)).toEqual([delayed.id]);
    });

    it("legacy inserts, legacy claims and backend reserves running at the same time never hand a job out twice", async () => {
      const { table, backend, legacy } = await setup();
      const reservers = await Promise.all([backend(), backend(), backend()]);
      // The legacy worker has its own connection, as workqd does, apart from the producer's.
      const workerDb = rawKnex(url);
      const worker = new LegacySql(workerDb, dialect, table);
      const total = 120;
      let produced = false;
      const backendTaken: string[] = [];
      const legacyTaken: number[] = [];

      const producer = (async () => {
        for (let n = 0; n < total; n++) await legacy.insertWorkq("race", `{"n":${n}}`);
        produced = true;
      })();
      const drain = async (take: () => Promise<number>) => {
        for (;;) {
          const finished = produced;
          if ((await take()) === 0) {
            if (finished) return;
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
        }
      };
      await Promise.all([
        producer,
        ...reservers.map((wq, i) =>
          drain(async () => {
            const jobs = await wq.reserve("default", { worker: `reserver-${i}`, count: 2, leaseMs: 120_000 });
            backendTaken.push(...jobs.map((j) => j.id));
            return jobs.length;
          }),
        ),
        drain(async () => {
          const lock = legacyLockId();
          try {
            await worker.claim(lock, 2);
          } catch (error) {
            // InnoDB may pick the daemon's UPDATE as a deadlock victim; workqd then claims nothing
            // this round and tries again at its next wake-up, as here.
            if ((error as { errno?: number }).errno === 1213) return 0;
            throw error;
          }
          const rows = await worker.claimed(lock, 2);
          legacyTaken.push(...rows.map((r) => r.id));
          return rows.length;
        }),
      ]);
      await workerDb.destroy();

      const all = [...backendTaken.map(Number), ...legacyTaken];
      expect(all).toHaveLength(total);
      expect(new Set(all).size).toBe(total);
      const rows = (await db(table).select("id", "status", "attempts", "locked_queue_id")) as Array<Record<string, unknown>>;
      expect(rows).toHaveLength(total);
      for (const row of rows) {
        const byBackend = backendTaken.includes(String(row.id));
        expect(row.status).toBe(byBackend ? "processing" : "loading");
        expect(Number(row.attempts)).toBe(byBackend ? 1 : 0);
        expect(String(row.locked_queue_id).startsWith("sy:")).toBe(byBackend);
      }
    });
  });
}

async function indexNames(db: Knex, dialect: string, table: string): Promise<string[]> {
  const sql =
    dialect === "postgres"
      ? "select indexname as name from pg_indexes where tablename = ?"
      : dialect === "mysql"
        ? "select index_name as name from information_schema.statistics where table_schema = database() and table_name = ?"
        : "select name from sqlite_master where type = 'index' and tbl_name = ?";
  return rowsOf<{ name: string }>(dialect as "postgres", await db.raw(sql, [table])).map((r) => String(r.name).toLowerCase());
}
