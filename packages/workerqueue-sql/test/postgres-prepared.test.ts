import type { Knex } from "knex";
import { afterAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { createWorkerQueueBackend } from "../src/index.js";
import { knexFromUrl } from "../src/options.js";
import { randomTable, rawKnex, singlePreparedConnection } from "./dialects.js";

/**
 * A PostgreSQL connection made from a URL sends a text it has run before as a named statement
 * (postgres-prepared.ts): probed in the server's own `pg_prepared_statements`, which lists the
 * statements of the session that asks.
 */
const url = serviceUrl("postgres");
const probe = rawKnex(url);
const opened: Knex[] = [];
afterAll(async () => {
  await Promise.all(opened.map((knex) => knex.destroy()));
  await probe.destroy();
});

interface Connection {
  query(config: { text: string; values?: unknown[] }): Promise<{ rows: Array<Record<string, unknown>> }>;
}

/** Runs `work` on one connection of the pool, where the session's prepared statements live. */
async function onOneConnection<T>(knex: Knex, work: (connection: Connection) => Promise<T>): Promise<T> {
  const connection = (await knex.client.acquireConnection()) as Connection;
  try {
    return await work(connection);
  } finally {
    await knex.client.releaseConnection(connection);
  }
}

const preparedTexts = async (connection: Connection) =>
  (await connection.query({ text: "select statement from pg_prepared_statements order by prepare_time" })).rows.map((row) => row.statement);

function openKnex(preparedStatements?: boolean): Knex {
  const knex = knexFromUrl(url, preparedStatements === undefined ? {} : { preparedStatements });
  opened.push(knex);
  return knex;
}

describe("workerqueue-sql on PostgreSQL: prepared statements", () => {
  it("a text with bindings is prepared from its second run on, answers each run's own values, and one without bindings never is", async () => {
    await onOneConnection(openKnex(), async (connection) => {
      const text = "select $1::int + 1 as n";
      expect((await connection.query({ text, values: [1] })).rows).toEqual([{ n: 2 }]);
      expect(await preparedTexts(connection)).toEqual([]);
      expect((await connection.query({ text, values: [41] })).rows).toEqual([{ n: 42 }]);
      expect(await preparedTexts(connection)).toEqual([text]);
      expect((await connection.query({ text, values: [9] })).rows).toEqual([{ n: 10 }]);
      await connection.query({ text: "select 7 as n", values: [] });
      await connection.query({ text: "select 7 as n", values: [] });
      expect(await preparedTexts(connection)).toEqual([text]);
    });
  });

  it("keeps at most 100 per connection, deallocating the least recently used", async () => {
    await onOneConnection(openKnex(), async (connection) => {
      const runTwice = async (text: string) => {
        for (const value of [1, 2]) await connection.query({ text, values: [value] });
      };
      const older = Array.from({ length: 100 }, (_, i) => `select $1::int + ${i} as n`);
      const newer = Array.from({ length: 20 }, (_, i) => `select $1::int - ${i} as n`);
      for (const text of older) await runTwice(text);
      expect(await preparedTexts(connection)).toHaveLength(100);
      // The first text, run again, becomes the most recently used: the next twenty go instead.
      await connection.query({ text: older[0] as string, values: [3] });
      for (const text of newer) await runTwice(text);
      const kept = await preparedTexts(connection);
      expect(kept).toHaveLength(100);
      expect(kept).toEqual(expect.arrayContaining([older[0], ...older.slice(21), ...newer]));
      for (const text of older.slice(1, 21)) expect(kept).not.toContain(text);
    });
  });

  it("a name older than the plan age is prepared afresh at its next run, the old one deallocated", async () => {
    let now = 0;
    const knex = singlePreparedConnection(url, { planAgeMs: 1_000, clock: () => now });
    opened.push(knex);
    await onOneConnection(knex, async (connection) => {
      const names = async () =>
        (await connection.query({ text: "select name from pg_prepared_statements where statement like 'select $1::int * 2%'" })).rows.map(
          (row) => row.name,
        );
      const text = "select $1::int * 2 as n";
      for (const value of [1, 2]) await connection.query({ text, values: [value] });
      const [first] = await names();
      expect(first).toMatch(/^sy_\d+$/);
      now = 999;
      expect((await connection.query({ text, values: [3] })).rows).toEqual([{ n: 6 }]);
      expect(await names()).toEqual([first]);
      // Its plans were made for the table as it was a plan age ago: the text goes under a new name.
      now = 1_000;
      expect((await connection.query({ text, values: [4] })).rows).toEqual([{ n: 8 }]);
      const renamed = await names();
      expect(renamed).toHaveLength(1);
      expect(renamed[0]).not.toBe(first);
    });
  });

  it("preparedStatements: false sends every text unnamed", async () => {
    await onOneConnection(openKnex(false), async (connection) => {
      for (const value of [1, 2, 3]) await connection.query({ text: "select $1::int as n", values: [value] });
      expect(await preparedTexts(connection)).toEqual([]);
    });
  });

  it("a table that gains a column under its prepared statements (another gateway's newer ready()) costs no call an error", async () => {
    const table = randomTable("prep");
    const backend = createWorkerQueueBackend({ url, table });
    try {
      await backend.ready();
      // Every statement of the cycle prepared: each text runs more than twice.
      for (let i = 0; i < 4; i++) {
        const { id } = (await backend.enqueue("q", { name: "before", data: { i } })).job;
        const [job] = await backend.reserve("q", { worker: "w" });
        expect(job?.id).toBe(id);
        await backend.complete("q", id, { worker: "w", result: i });
        expect((await backend.get("q", id))?.state).toBe("completed");
      }
      await probe.schema.alterTable(table, (t) => t.text("added_by_a_newer_version"));
      const { id } = (await backend.enqueue("q", { name: "after", data: {} })).job;
      const [job] = await backend.reserve("q", { worker: "w" });
      expect(job?.id).toBe(id);
      expect((await backend.complete("q", id, { worker: "w", result: "done" })).result).toBe("done");
      expect((await backend.get("q", id))?.state).toBe("completed");
      const stored = await probe(table)
        .where({ id: Number(id) })
        .first();
      expect(stored.status).toBe("complete");
    } finally {
      await backend.close();
      await probe.schema.dropTableIfExists(table);
      await probe.schema.dropTableIfExists(`${table}_paused_queues`);
      await probe.schema.dropTableIfExists(`${table}_sy_recurring`);
    }
  });
});
