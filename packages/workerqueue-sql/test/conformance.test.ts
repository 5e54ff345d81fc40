import { runConformance } from "@switchyard/conformance";
import { afterAll } from "vitest";
import { WORKERQUEUE_CAPABILITIES, createWorkerQueueBackend } from "../src/index.js";
import { DIALECTS, idTextSql, randomTable, rawKnex, removeSqliteFile, urlFor } from "./dialects.js";

/** A store of each dialect that cannot be reached: a file that cannot be opened, a closed port. */
const UNREACHABLE = {
  sqlite: "sqlite:/nonexistent-switchyard-dir/jobs.sqlite",
  postgres: "postgres://postgres@127.0.0.1:1/postgres",
  mysql: "mysql://root@127.0.0.1:1/switchyard",
} as const;

for (const dialect of DIALECTS) {
  const url = urlFor(dialect);
  const table = randomTable("wq_cf");
  const probeDb = rawKnex(url);

  afterAll(async () => {
    await probeDb.schema.dropTableIfExists(table);
    await probeDb.schema.dropTableIfExists(`${table}_paused_queues`);
    await probeDb.destroy();
    removeSqliteFile(url);
  });

  runConformance({
    name: `workerqueue-sql (${dialect})`,
    createUnreachableBackend: () => createWorkerQueueBackend({ url: UNREACHABLE[dialect] }),
    capabilities: WORKERQUEUE_CAPABILITIES,
    createBackend: async () => {
      const backend = createWorkerQueueBackend({ url, table });
      await backend.ready();
      return backend;
    },
    probe: {
      // The `status` column as the legacy daemons read it.
      async nativeState(queue, id) {
        const row = await probeDb(table)
          .select("status")
          .whereRaw("coalesce(sy_queue, 'default') = ?", [queue])
          .where((q) => q.where("sy_job_id", id).orWhere((q2) => q2.whereNull("sy_job_id").whereRaw(`${idTextSql(dialect)} = ?`, [id])))
          .first();
        return row ? String(row.status) : null;
      },
      async countJobs(queue) {
        const [row] = await probeDb(table).whereRaw("coalesce(sy_queue, 'default') = ?", [queue]).count({ n: "*" });
        return Number(row?.n ?? 0);
      },
      expectedStates: {
        waiting: ["pending"],
        delayed: ["pending"],
        active: ["loading", "processing"],
        completed: ["complete"],
        failed: ["error"],
        canceled: ["error"],
      },
    },
  });
}
