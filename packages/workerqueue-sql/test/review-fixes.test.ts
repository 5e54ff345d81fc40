import type { Backend } from "@switchyard/core";
import { afterAll, describe, expect, it } from "vitest";
import { type WorkerQueueBackendOptions, createWorkerQueueBackend } from "../src/index.js";
import { DIALECTS, legacyDdl, randomTable, rawKnex, removeSqliteFile, urlFor } from "./dialects.js";

/** Rules found by review: each failed before its fix. */
for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): review fixes`, () => {
    const url = urlFor(dialect);
    const table = randomTable("wq_rv");
    const db = rawKnex(url);
    const backends: Backend[] = [];
    const open = async (options: Partial<WorkerQueueBackendOptions> = {}) => {
      const backend = createWorkerQueueBackend({ url, table, ...options });
      backends.push(backend);
      await backend.ready();
      return backend;
    };
    let n = 0;
    const queue = () => `rv-${dialect}-${++n}-${Math.random().toString(36).slice(2, 8)}`;
    const row = async (id: string) => (await db(table).where("id", Number(id)).first()) as Record<string, unknown>;

    afterAll(async () => {
      await Promise.all(backends.map((b) => b.close()));
      await db.schema.dropTableIfExists(table);
      await db.schema.dropTableIfExists(`${table}_paused_queues`);
      await db.destroy();
      removeSqliteFile(url);
    });

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
      }
    });

    it("reserve hands out an expired lease before a waiting job of higher priority", async () => {
      const wq = await open();
      const q = queue();
      const { job: a } = await wq.enqueue(q, { name: "a", priority: 5 });
      expect((await wq.reserve(q, { worker: "first", leaseMs: 50 }))[0]?.id).toBe(a.id);
      const { job: b } = await wq.enqueue(q, { name: "b", priority: 10 });
      await new Promise((resolve) => setTimeout(resolve, 120));
      const [next] = await wq.reserve(q, { worker: "second" });
      expect(next?.id).toBe(a.id);
      expect(next?.attempts).toBe(2);
      expect((await row(b.id)).status).toBe("pending");
      const both = await wq.reserve(q, { worker: "third", count: 2, leaseMs: 50 });
      expect(both.map((job) => job.id)).toEqual([b.id]);
      await new Promise((resolve) => setTimeout(resolve, 120));
      const { job: c } = await wq.enqueue(q, { name: "c", priority: 20 });
      // In one answer too: the expired lease (priority 10) comes before the waiting job (priority 20).
      expect((await wq.reserve(q, { worker: "fourth", count: 3 })).map((job) => job.id)).toEqual([b.id, c.id]);
    });
  });
}
