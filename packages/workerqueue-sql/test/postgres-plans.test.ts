import { type Backend, completeAndReserve } from "@switchyard/core";
import { afterAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { createWorkerQueueBackend } from "../src/index.js";
import { randomTable, rawKnex, singlePreparedConnection } from "./dialects.js";

/**
 * The plans PostgreSQL makes, and keeps, for the group claim (postgres-claim.ts) and a look-up of many
 * ids (lookup.ts) must not hang on what its statistics say of a queue: those lag behind a job table (a
 * queue that came after the last ANALYZE is estimated at one row), and with the queue's name in view
 * the planner then read workq's own (status, locked_queue_id) index: every job of a status in every
 * queue, at every claim. Probed in the plans themselves and in the server's `pg_prepared_statements`.
 */
const url = serviceUrl("postgres");
const probe = rawKnex(url);
/** One connection, its texts prepared as a URL-made store's are: the session whose plans are read. */
const single = singlePreparedConnection(url);
const tables: string[] = [];
const backends: Backend[] = [];
afterAll(async () => {
  await Promise.all(backends.map((backend) => backend.close()));
  for (const table of tables) {
    await probe.schema.dropTableIfExists(table);
    await probe.schema.dropTableIfExists(`${table}_paused_queues`);
    await probe.schema.dropTableIfExists(`${table}_sy_recurring`);
  }
  await single.destroy();
  await probe.destroy();
});

async function openBackend(): Promise<{ backend: Backend; table: string }> {
  const table = randomTable("wq_plans");
  tables.push(table);
  const backend = createWorkerQueueBackend({ knex: single, table, releaseDelayedEveryMs: 0 });
  backends.push(backend);
  await backend.ready();
  return { backend, table };
}

const jobs = (count: number) => Array.from({ length: count }, (_, i) => ({ name: `job-${i}`, priority: i % 3 }));

/** The statements `work` sends whose text contains `marker`, as sent ($1, $2...) with their values. */
async function sent(marker: string, work: () => Promise<unknown>): Promise<Array<{ sql: string; bindings: unknown[] }>> {
  const seen: Array<{ sql: string; bindings: unknown[] }> = [];
  const capture = (query: { sql: string; bindings: unknown[] }) => {
    if (query.sql.includes(marker)) seen.push(query);
  };
  single.on("query", capture);
  try {
    await work();
  } finally {
    single.off("query", capture);
  }
  return seen;
}

/** The plan PostgreSQL makes for a statement as sent ($1, $2...) with its values. */
async function planOf(statement: { sql: string; bindings: unknown[] }): Promise<string> {
  type Connection = { query(text: string, values: unknown[]): Promise<{ rows: Array<{ "QUERY PLAN": string }> }> };
  const connection = (await probe.client.acquireConnection()) as Connection;
  try {
    const { rows } = await connection.query(`explain ${statement.sql}`, statement.bindings);
    return rows.map((line) => line["QUERY PLAN"]).join("\n");
  } finally {
    await probe.client.releaseConnection(connection);
  }
}

describe("workerqueue-sql on PostgreSQL: the group claim's plan", () => {
  it("reads a queue the statistics do not know in the claim index, never every held or pending job of the table", async () => {
    const { backend, table } = await openBackend();
    // Analyzed while the table held one queue, all pending, no lease: statistics a new queue contradicts.
    await backend.enqueueBulk("known", jobs(3_000));
    await probe.raw("analyze ??", [table]);
    await backend.enqueueBulk("fresh", jobs(3_000));
    const held = await backend.reserve("fresh", { worker: "w", count: 50 });
    const [reserve] = await sent("claimed as", () => backend.reserve("fresh", { worker: "w" }));
    const [completion] = await sent("completion (k", () =>
      completeAndReserve(backend, "fresh", held[0]?.id as string, { worker: "w" }, { worker: "w" }),
    );
    for (const statement of [reserve, completion]) {
      expect(statement).toBeDefined();
      const plan = await planOf(statement as { sql: string; bindings: unknown[] });
      // Two reads of expired leases (one per held status) and one of due jobs, each in the claim index's order.
      expect(plan.match(new RegExp(`Index Scan using ${table}_sy_claim_idx`, "g"))).toHaveLength(3);
      expect(plan).not.toContain(`${table}_status_locked_idx`);
      expect(plan).not.toMatch(new RegExp(`Seq Scan on ${table}\\b`));
    }
  });

  it("is planned once for all runs, not again for every run", async () => {
    const { backend, table } = await openBackend();
    await backend.enqueueBulk("other", jobs(1_000));
    await probe.raw("analyze ??", [table]);
    await backend.enqueueBulk("q", jobs(100));
    let [job] = await backend.reserve("q", { worker: "w" });
    for (let run = 0; run < 20 && job; run++) {
      [job] = (await completeAndReserve(backend, "q", job.id, { worker: "w" }, { worker: "w" })).next;
    }
    const { rows } = await single.raw(
      "select generic_plans, custom_plans from pg_prepared_statements where statement like '%completion (k%claimed as%'",
    );
    expect(rows).toHaveLength(1);
    // PostgreSQL plans a prepared statement for its values five times before it weighs one plan for all.
    expect(Number(rows[0].custom_plans)).toBe(5);
    expect(Number(rows[0].generic_plans)).toBeGreaterThanOrEqual(14);
  });
});

describe("workerqueue-sql on PostgreSQL: the plan kept for a look-up of many ids", () => {
  it("reads each id in the (queue, job id) index, never the whole queue, whatever the statistics say", async () => {
    const { backend, table } = await openBackend();
    const jobs = (from: number, count: number) => Array.from({ length: count }, (_, i) => ({ name: "job", id: `job-${from + i}` }));
    // A migration's pages into a table PostgreSQL has not analyzed yet.
    for (let page = 0; page < 10; page++) await backend.enqueueBulk("q", jobs(page * 1_000, 1_000));
    const wanted = ["job-7", "job-4000", "job-99999"];
    const getMany = backend.getMany?.bind(backend);
    expect(getMany).toBeDefined();
    // Twice: a text is prepared from its second run.
    for (let run = 0; run < 2; run++)
      expect((await getMany?.("q", wanted))?.map((job) => job?.id ?? null)).toEqual(["job-7", "job-4000", null]);
    const { rows } = await single.raw(
      "select statement, parameter_types::text[] as types from pg_prepared_statements where statement like '%sy_job_id%' and statement not like '%insert%' and statement not like '%claimed as%'",
    );
    expect(rows).toHaveLength(1);
    // The plan PostgreSQL keeps once a run's own plan stops looking cheaper (a fresh table: at once),
    // asked for as such of the same text.
    await single.raw("set plan_cache_mode = force_generic_plan");
    try {
      await single.raw(`prepare kept (${rows[0].types.join(", ")}) as ${rows[0].statement.replaceAll("?", "\\?")}`);
      const args = (rows[0].types as string[]).map((type) => (type === "text[]" ? `'{${wanted.join(",")}}'` : "'q'"));
      const plan = await single.raw(`explain execute kept (${args.join(", ")})`);
      const text = (plan.rows as Array<{ "QUERY PLAN": string }>).map((line) => line["QUERY PLAN"]).join("\n");
      // One look-up per id: the job id is part of the index condition, never a filter over the queue's rows.
      expect(text).toContain(`Index Scan using ${table}_sy_job_id_uq`);
      expect(text).toMatch(/Index Cond: .*sy_queue.* AND .*sy_job_id/);
      expect(text).not.toMatch(/Filter: .*sy_job_id|Seq Scan|Bitmap Heap Scan/);
    } finally {
      await single.raw("deallocate kept").catch(() => undefined);
      await single.raw("reset plan_cache_mode");
    }
  });
});
