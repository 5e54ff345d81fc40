import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createWorkerQueueBackend } from "../src/index.js";
import { knexFromUrl, resolveStore } from "../src/options.js";
import { SqliteStatements } from "../src/sqlite-statements.js";

/**
 * A SQLite connection keeps its prepared statements by text (options.ts), so a query knex sends
 * again is not prepared again; the least recently used go beyond 200. A file's commits are synced
 * as `sqliteSynchronous` says.
 */
const dir = mkdtempSync(join(tmpdir(), "switchyard-sqlite-statements-"));
const knex = knexFromUrl(`sqlite:${join(dir, "q.sqlite")}`);
afterAll(async () => {
  await knex.destroy();
  rmSync(dir, { recursive: true, force: true });
});

describe("workerqueue-sql on SQLite: prepared statements and commits", () => {
  it("a file runs in WAL mode with synchronous NORMAL unless sqliteSynchronous asks for FULL; another value is refused", async () => {
    const pragmas = async (db: typeof knex) => {
      const connection = (await db.client.acquireConnection()) as { pragma(sql: string, options: { simple: true }): unknown };
      try {
        return [connection.pragma("journal_mode", { simple: true }), connection.pragma("synchronous", { simple: true })];
      } finally {
        await db.client.releaseConnection(connection);
      }
    };
    // SQLite's codes: 1 NORMAL, 2 FULL.
    expect(await pragmas(knex)).toEqual(["wal", 1]);
    const full = knexFromUrl(`sqlite:${join(dir, "full.sqlite")}`, { sqliteSynchronous: "full" });
    try {
      expect(await pragmas(full)).toEqual(["wal", 2]);
    } finally {
      await full.destroy();
    }
    expect(() => createWorkerQueueBackend({ url: `sqlite:${join(dir, "x.sqlite")}`, sqliteSynchronous: "off" as "full" })).toThrow(
      /sqliteSynchronous must be "normal" or "full"/,
    );
  });

  it("the same text gives the same statement, the least recently used is prepared again past 200, and jobs still run", async () => {
    const connection = (await knex.client.acquireConnection()) as { prepare(sql: string): unknown };
    try {
      const first = connection.prepare("select 1");
      expect(connection.prepare("select 1")).toBe(first);
      for (let i = 0; i < 200; i++) connection.prepare(`select ${i + 2}`);
      // 201 texts seen since "select 1" was last used: it was dropped.
      expect(connection.prepare("select 1")).not.toBe(first);
      const kept = connection.prepare("select 201");
      expect(connection.prepare("select 201")).toBe(kept);
    } finally {
      await knex.client.releaseConnection(connection);
    }
    // The statements reused across calls answer each call's own bindings.
    const backend = createWorkerQueueBackend({ knex });
    await backend.ready();
    await backend.enqueueBulk("q", [
      { name: "a", data: 1 },
      { name: "b", data: 2 },
    ]);
    const [a] = await backend.reserve("q", { worker: "w" });
    const [b] = await backend.reserve("q", { worker: "w" });
    expect([a?.name, b?.name]).toEqual(["a", "b"]);
    expect((await backend.complete("q", a?.id as string, { worker: "w", result: "x" })).result).toBe("x");
    expect((await backend.complete("q", b?.id as string, { worker: "w", result: "y" })).result).toBe("y");
    expect(await knex("jobs").select("status").orderBy("id")).toEqual([{ status: "complete" }, { status: "complete" }]);
    await backend.close();
  });

  it("statements the backend runs on the connection directly are kept by text too, the least recently used prepared again past 200", async () => {
    const statements = new SqliteStatements(resolveStore({ knex }).store);
    const prepared: string[] = [];
    await statements.withConnection((connection) => {
      const prepare = connection.prepare.bind(connection);
      const counting = Object.assign(Object.create(connection), {
        prepare: (sql: string) => {
          prepared.push(sql);
          return prepare(sql);
        },
      });
      expect(statements.rows(counting, "select ? as n", [1])).toEqual([{ n: 1 }]);
      // Its bindings as knex passes them: a boolean as 0/1.
      expect(statements.rows(counting, "select ? as n", [true])).toEqual([{ n: 1 }]);
      expect(prepared).toEqual(["select ? as n"]);
      for (let i = 0; i < 200; i++) statements.rows(counting, `select ${i} as n`, []);
      statements.rows(counting, "select ? as n", [2]);
      expect(prepared.filter((sql) => sql === "select ? as n")).toHaveLength(2);
    });
  });
});
