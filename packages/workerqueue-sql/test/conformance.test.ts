import { runConformance } from "@switchyard/conformance";
import { afterAll } from "vitest";
import { WORKERQUEUE_CAPABILITIES, createWorkerQueueBackend } from "../src/index.js";
import { workerQueueProbe } from "../src/testing.js";
import { DIALECTS, randomTable, rawKnex, removeSqliteFile, urlFor } from "./dialects.js";

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
    await probeDb.schema.dropTableIfExists(`${table}_sy_recurring`);
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
    probe: workerQueueProbe(probeDb, table, dialect),
  });
}
