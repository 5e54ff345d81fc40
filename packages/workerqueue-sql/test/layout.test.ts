import { describe, expect, it } from "vitest";
import { DELAYED_LOCK, MYSQL_DELAYED_LOCK, createWorkerQueueBackend } from "../src/index.js";
import { DIALECTS, nowSql, randomTable, rawKnex, useDialectTable } from "./dialects.js";

/** Rules of the native layout that the shared conformance suite cannot know about. */
for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): native layout`, () => {
    const { url, table, db, backends, open, row, queue: nextQueue } = useDialectTable(dialect, "wq_layout");
    const queue = () => nextQueue("layout");

    it("a reserved job holds a sy: lock id that fits varchar(40), its worker in sy_worker, and attempts counted in the row", async () => {
      const wq = await open();
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "thumb" });
      expect(await row(job.id)).toMatchObject({ status: "pending", locked_queue_id: "", sy_queue: q });
      await wq.reserve(q, { worker: "a-worker-name-longer-than-forty-characters-on-purpose" });
      const reserved = await row(job.id);
      expect(reserved.status).toBe("processing");
      expect(String(reserved.locked_queue_id)).toMatch(/^sy:[0-9a-f]{32}$/);
      expect(String(reserved.locked_queue_id).length).toBeLessThanOrEqual(40);
      expect(reserved.sy_worker).toBe("a-worker-name-longer-than-forty-characters-on-purpose");
      expect(Number(reserved.attempts)).toBe(1);
    });

    it("complete() writes status 'complete' (never 'completed'), unlocks the row and records duration in whole seconds", async () => {
      const wq = await open();
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "encode" });
      await wq.reserve(q, { worker: "w" });
      await db(table)
        .where("id", Number(job.id))
        .update({ sy_started_ms: Date.now() - 3_200 });
      await wq.complete(q, job.id, { worker: "w", result: { frames: 10 } });
      expect(await row(job.id)).toMatchObject({ status: "complete", locked_queue_id: "", duration: 3, sy_result: '{"frames":10}' });
    });

    it("fail() for good writes status 'error' with the message in details; a retry writes 'pending' again", async () => {
      const wq = await open();
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "flaky", maxAttempts: 2 });
      await wq.reserve(q, { worker: "w" });
      await wq.fail(q, job.id, { worker: "w", error: { message: "first", group: "Timeout" } });
      expect(await row(job.id)).toMatchObject({ status: "pending", locked_queue_id: "", details: "first", sy_error_group: "Timeout" });
      await wq.reserve(q, { worker: "w" });
      await wq.fail(q, job.id, { worker: "w", error: { message: "second" } });
      expect(await row(job.id)).toMatchObject({ status: "error", locked_queue_id: "", details: "second" });
      expect(Number((await row(job.id)).attempts)).toBe(2);
    });

    it("a delayed job is a pending row locked with the delay marker, so the legacy claim (lock '') passes it by", async () => {
      const wq = await open();
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "later", delay: 60_000 });
      const stored = await row(job.id);
      expect(stored).toMatchObject({ status: "pending", locked_queue_id: dialect === "mysql" ? MYSQL_DELAYED_LOCK : DELAYED_LOCK });
      expect(Number(stored.sy_run_at)).toBe(job.runAt);
    });

    it("cancel() writes status 'error' with sy_canceled_ms, and get() reports canceled", async () => {
      const wq = await open();
      const q = queue();
      const { job } = await wq.enqueue(q, { name: "never" });
      await wq.cancel(q, job.id);
      const stored = await row(job.id);
      expect(stored).toMatchObject({ status: "error", locked_queue_id: "" });
      expect(stored.sy_canceled_ms).not.toBeNull();
      expect((await wq.get(q, job.id))?.state).toBe("canceled");
      expect((await wq.counts(q)).canceled).toBe(1);
      await expect(wq.cancel(q, job.id)).rejects.toMatchObject({ code: "INVALID_STATE" });
    });

    it("dataFormat yaml writes Ruby YAML with symbol keys, and a json backend reads the same row", async () => {
      const yamlBackend = await open({ dataFormat: "yaml" });
      const jsonBackend = await open();
      const q = queue();
      const { job } = await yamlBackend.enqueue(q, { name: "image_thumb", data: { id: 5, size: "64x32" } });
      expect((await row(job.id)).data).toBe("--- \n:id: 5\n:size: 64x32\n");
      expect((await jsonBackend.get(q, job.id))?.data).toEqual({ id: 5, size: "64x32" });
    });

    it("export then import keeps a YAML row in YAML, and taskable_* in their columns", async () => {
      const wq = await open();
      const q = queue();
      await db(table).insert({
        name: "image_thumb",
        status: "pending",
        data: "--- \n:id: 7\n",
        taskable_id: 7,
        taskable_type: "Image",
        sy_queue: q,
        created_at: db.raw(nowSql(dialect)),
      });
      const { items } = await wq.export(q);
      const target = queue();
      expect(await wq.import(target, items)).toMatchObject({ imported: 1, skipped: [] });
      const [copy] = (await db(table).where("sy_queue", target)) as Array<Record<string, unknown>>;
      expect(copy).toMatchObject({ data: "--- \n:id: 7\n", taskable_id: 7, taskable_type: "Image", sy_job_id: items[0]?.id });
    });

    it("defaultQueue names the queue of legacy rows that have no sy_queue", async () => {
      const otherTable = randomTable("wq_dq");
      const wq = createWorkerQueueBackend({ url, table: otherTable, defaultQueue: "legacy" });
      backends.push(wq);
      await wq.ready();
      try {
        await db.raw(
          `INSERT INTO ${otherTable} (name,status,attempts,locked_queue_id,data,created_at) VALUES ('run','pending',0,'','{}',${nowSql(dialect)})`,
        );
        expect(await wq.queues()).toEqual(["legacy"]);
        expect(await wq.reserve("default", { worker: "w" })).toEqual([]);
        expect(await wq.reserve("legacy", { worker: "w" })).toHaveLength(1);
      } finally {
        await db.schema.dropTableIfExists(otherTable);
        await db.schema.dropTableIfExists(`${otherTable}_paused_queues`);
        await db.schema.dropTableIfExists(`${otherTable}_sy_recurring`);
      }
    });

    it("a caller-chosen numeric id is never reused as a later job's row id in the same queue", async () => {
      const wq = await open();
      const q = queue();
      const [top] = (await db(table).max({ max: "id" })) as Array<{ max: number | null }>;
      const chosen = String(Number(top?.max ?? 0) + 3);
      await wq.enqueue(q, { id: chosen, name: "chosen" });
      const later = await wq.enqueueBulk(
        q,
        Array.from({ length: 6 }, () => ({ name: "later" })),
      );
      expect(later.map((r) => r.job.id)).not.toContain(chosen);
      expect((await wq.get(q, chosen))?.name).toBe("chosen");
    });

    it("concurrent bulk enqueues sharing a unique key agree on one job, and each batch still writes its other jobs", async () => {
      const producers = await Promise.all(Array.from({ length: 6 }, () => open()));
      const q = queue();
      // Connections open first, so the batches really overlap.
      await Promise.all(producers.map((wq) => wq.counts(q)));
      const batches = await Promise.all(
        producers.map((wq, i) =>
          wq.enqueueBulk(q, [{ name: "probe", uniqueKey: `own-${i}` }, { name: `own-${i}` }, { name: "shared", uniqueKey: "same" }]),
        ),
      );
      const shared = batches.map((batch) => batch[2]);
      expect(new Set(shared.map((r) => r?.job.id)).size).toBe(1);
      expect(shared.filter((r) => r?.created)).toHaveLength(1);
      const [count] = (await db(table).where("sy_queue", q).count({ n: "*" })) as Array<{ n: number | string }>;
      expect(Number(count?.n)).toBe(6 * 2 + 1);
    });

    it("concurrent imports of the same jobs write each job once and report the others as skipped", async () => {
      const importers = await Promise.all(Array.from({ length: 4 }, () => open()));
      const source = queue();
      const target = queue();
      await importers[0]?.enqueueBulk(source, [{ name: "a" }, { name: "b" }, { name: "c" }]);
      const { items } = (await importers[0]?.export(source)) ?? { items: [] };
      const results = await Promise.all(importers.map((wq) => wq.import(target, items)));
      expect(results.reduce((sum, r) => sum + r.imported, 0)).toBe(3);
      expect(results.reduce((sum, r) => sum + r.skipped.length, 0)).toBe(3 * 3);
      const [count] = (await db(table).where("sy_queue", target).count({ n: "*" })) as Array<{ n: number | string }>;
      expect(Number(count?.n)).toBe(3);
    });

    it("import() of a job whose unique key another job of the queue holds is a ConflictError and writes none of the batch", async () => {
      const wq = await open();
      const source = queue();
      const target = queue();
      await wq.enqueue(target, { name: "holder", uniqueKey: "k" });
      await wq.enqueueBulk(source, [{ name: "free" }, { name: "clash", uniqueKey: "k" }]);
      const { items } = await wq.export(source);
      await expect(wq.import(target, items)).rejects.toMatchObject({ code: "CONFLICT" });
      const [count] = (await db(table).where("sy_queue", target).count({ n: "*" })) as Array<{ n: number | string }>;
      expect(Number(count?.n)).toBe(1);
    });

    it("pause() is kept in the <table>_paused_queues side table", async () => {
      const wq = await open();
      const q = queue();
      await wq.pause(q);
      await wq.pause(q);
      expect(await db(`${table}_paused_queues`).where("queue", q)).toHaveLength(1);
      await wq.resume(q);
      expect(await db(`${table}_paused_queues`).where("queue", q)).toHaveLength(0);
    });

    it("an injected knex instance is used as is and left open by close()", async () => {
      const injected = rawKnex(url);
      const wq = createWorkerQueueBackend({ knex: injected, table });
      await wq.ready();
      expect(wq.kind).toBe(`workerqueue-sql:${dialect}`);
      await wq.close();
      expect(await injected(table).count({ n: "*" })).toHaveLength(1);
      await injected.destroy();
    });
  });
}

describe("workerqueue-sql: options", () => {
  it("an unsupported url, a bad table name or a bad dataFormat is a ValidationError", () => {
    expect(() => createWorkerQueueBackend({ url: "oracle://x" })).toThrow(expect.objectContaining({ code: "VALIDATION" }));
    expect(() => createWorkerQueueBackend({ url: "sqlite::memory:", table: "jobs; drop table x" })).toThrow(
      expect.objectContaining({ code: "VALIDATION" }),
    );
    expect(() => createWorkerQueueBackend({ url: "sqlite::memory:", dataFormat: "xml" as "json" })).toThrow(
      expect.objectContaining({ code: "VALIDATION" }),
    );
    expect(() => createWorkerQueueBackend({})).toThrow(expect.objectContaining({ code: "VALIDATION" }));
  });

  it("a database that cannot be reached is a BackendUnavailableError", async () => {
    for (const url of ["postgres://postgres@127.0.0.1:1/none", "mysql://root@127.0.0.1:1/none", "sqlite:/no/such/dir/jobs.sqlite"]) {
      const wq = createWorkerQueueBackend({ url });
      await expect(wq.ready(), url).rejects.toMatchObject({ code: "BACKEND_UNAVAILABLE" });
      await wq.close();
    }
  });

  it("sqlite::memory: gives a working embedded database", async () => {
    const wq = createWorkerQueueBackend({ url: "sqlite::memory:" });
    await wq.ready();
    const { job } = await wq.enqueue("default", { name: "x", data: [1] });
    expect((await wq.reserve("default", { worker: "w" }))[0]?.id).toBe(job.id);
    await wq.close();
  });
});
