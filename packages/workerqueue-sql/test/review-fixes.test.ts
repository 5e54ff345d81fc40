import type { Backend } from "@switchyard/core";
import { afterAll, describe, expect, it } from "vitest";
import { type WorkerQueueBackendOptions, createWorkerQueueBackend } from "../src/index.js";
import { DIALECTS, randomTable, rawKnex, removeSqliteFile, urlFor } from "./dialects.js";

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
  });
}
