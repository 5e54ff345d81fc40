import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { type Backend, type Job, completeAndReserve, hasJobLookup } from "@switchyard/core";
import type { Knex } from "knex";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorkerQueueBackend } from "../src/index.js";
import { sendScript } from "../src/mysql-script.js";
import { knexFromUrl, resolveStore } from "../src/options.js";
import { knexFactory, randomTable, urlFor, useDialectTable } from "./dialects.js";
import { LegacySql } from "./legacy-sql.js";

/**
 * MySQL/MariaDB: the job cycle in round trips. A claim (its whole READ COMMITTED transaction) and a
 * complete, heartbeat or setProgress (the guarded update and its read-back) each go as one query
 * text, so reserve + complete is 2 round trips and completeAndReserve 1. Counted at the mysql2
 * driver, as bench/sql-adapter.ts counts them: every query or execute a connection sends.
 */

/** The SQL text of every statement the mysql2 connections of this process send while counting. */
const sent: string[] = [];
let counting = false;

const require = createRequire(import.meta.url);
const mysqlConnection = require(join(dirname(require.resolve("mysql2")), "lib/base/connection.js")) as {
  prototype: Record<string, (...args: unknown[]) => unknown>;
};
const originals = new Map<string, (...args: unknown[]) => unknown>();

beforeAll(() => {
  for (const method of ["query", "execute"]) {
    const original = mysqlConnection.prototype[method] as (...args: unknown[]) => unknown;
    originals.set(method, original);
    mysqlConnection.prototype[method] = function (this: unknown, ...args: unknown[]) {
      const first = args[0] as string | { sql?: string } | undefined;
      if (counting) sent.push(typeof first === "string" ? first : String(first?.sql ?? ""));
      return original.apply(this, args);
    };
  }
});

afterAll(() => {
  for (const [method, original] of originals) mysqlConnection.prototype[method] = original;
});

/**
 * The statements `run` sends, but the release of due delayed rows that a reserve makes at most once
 * a second (for the legacy daemons, not part of the cycle).
 */
async function statementsOf(run: () => Promise<unknown>): Promise<string[]> {
  sent.length = 0;
  counting = true;
  try {
    await run();
  } finally {
    counting = false;
  }
  return sent.filter((sql) => !/^update `\w+` set `locked_queue_id` = \?.* where `status` = \? and `locked_queue_id` in/.test(sql));
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("workerqueue-sql (mysql): round trips of the job cycle", () => {
  const { url, table, db, open, queue: nextQueue, backends } = useDialectTable("mysql", "wq_rt");
  const queue = () => nextQueue("rt");

  it("reserve + complete is 2 statements, completeAndReserve 1, heartbeat and setProgress 1 each", async () => {
    const wq = await open();
    const q = queue();
    await wq.enqueueBulk(
      q,
      Array.from({ length: 6 }, (_, i) => ({ name: `job-${i}` })),
    );
    // The first call of a backend asks the server's version once.
    const [first] = await wq.reserve(q, { worker: "w" });
    await wq.complete(q, first?.id as string, { worker: "w" });

    let held: Job | undefined;
    expect(
      await statementsOf(async () => {
        [held] = await wq.reserve(q, { worker: "w", leaseMs: 60_000 });
      }),
    ).toHaveLength(1);
    expect(held?.state).toBe("active");
    expect(await statementsOf(() => wq.heartbeat(q, held?.id as string, { worker: "w", leaseMs: 90_000 }))).toHaveLength(1);
    expect(
      await statementsOf(() => wq.setProgress?.(q, held?.id as string, { worker: "w", progress: { at: 1 } }) as Promise<Job>),
    ).toHaveLength(1);
    let completed: Job | undefined;
    expect(
      await statementsOf(async () => {
        completed = await wq.complete(q, held?.id as string, { worker: "w", result: { ok: true } });
      }),
    ).toHaveLength(1);
    expect([completed?.state, completed?.result, completed?.progress]).toEqual(["completed", { ok: true }, { at: 1 }]);

    const [next] = await wq.reserve(q, { worker: "w" });
    let chained: Awaited<ReturnType<typeof completeAndReserve>> | undefined;
    expect(
      await statementsOf(async () => {
        chained = await completeAndReserve(wq, q, next?.id as string, { worker: "w" }, { worker: "w" });
      }),
    ).toHaveLength(1);
    expect(chained?.completed.state).toBe("completed");
    expect(chained?.next.map((job) => job.state)).toEqual(["active"]);
    // An empty queue answers no job, in one statement too.
    await wq.reserve(q, { worker: "w", count: 10 });
    expect(await statementsOf(() => wq.reserve(q, { worker: "w" }))).toHaveLength(1);
  });

  it("a claim of several hands out expired leases first, then due rows, each in priority then id order", async () => {
    const wq = await open();
    const q = queue();
    const [e1, e2] = await wq.enqueueBulk(q, [
      { name: "e1", priority: 0 },
      { name: "e2", priority: 1 },
    ]);
    expect((await wq.reserve(q, { worker: "gone", count: 2, leaseMs: 1 })).map((job) => job.id)).toEqual([e2?.job.id, e1?.job.id]);
    await wait(5);
    const [d1, d2, d3] = await wq.enqueueBulk(q, [
      { name: "d1", priority: 9 },
      { name: "d2", priority: 0 },
      { name: "d3", priority: 9 },
    ]);
    const taken = await wq.reserve(q, { worker: "w", count: 4 });
    expect(taken.map((job) => job.name)).toEqual(["e2", "e1", "d1", "d3"]);
    expect(taken.map((job) => job.attempts)).toEqual([2, 2, 1, 1]);
    const rows = await db(table).whereIn(
      "id",
      [e1, e2, d1, d3].map((r) => Number(r?.job.id)),
    );
    // One lock id for the claim, written to every row it took.
    expect(new Set(rows.map((row) => row.locked_queue_id)).size).toBe(1);
    expect((await db(table).where("id", Number(d2?.job.id)).first()).status).toBe("pending");
    // Through completeAndReserve the next claim follows the same order.
    await wq.enqueueBulk(q, [
      { name: "d4", priority: 3 },
      { name: "d5", priority: 4 },
    ]);
    const chained = await completeAndReserve(wq, q, taken[0]?.id as string, { worker: "w" }, { worker: "w", count: 2 });
    expect(chained.next.map((job) => job.name)).toEqual(["d5", "d4"]);
  });

  it("the default queue merges legacy rows (no sy_queue) and its own rows in claim order", async () => {
    const q = queue();
    const wq = await open({ defaultQueue: q });
    await wq.enqueueBulk(q, [
      { name: "own-p2", priority: 2 },
      { name: "own-p0", priority: 0 },
    ]);
    await db(table).insert([
      { name: "legacy-a", status: "pending", locked_queue_id: "", attempts: 0 },
      { name: "legacy-b", status: "pending", locked_queue_id: "", attempts: 0, sy_priority: 2 },
    ]);
    const taken = await wq.reserve(q, { worker: "w", count: 3 });
    expect(taken.map((job) => job.name)).toEqual(["own-p2", "legacy-b", "own-p0"]);
    expect(taken.every((job) => job.queue === q)).toBe(true);
  });

  it("completeAndReserve of a job another worker holds is refused, and claims nothing", async () => {
    const wq = await open();
    const q = queue();
    const [held, waiting] = await wq.enqueueBulk(q, [{ name: "held" }, { name: "waiting" }]);
    await wq.reserve(q, { worker: "owner" });
    await expect(completeAndReserve(wq, q, held?.job.id as string, { worker: "intruder" }, { worker: "intruder" })).rejects.toMatchObject({
      code: "LEASE_LOST",
    });
    expect((await db(table).where("id", Number(held?.job.id)).first()).status).toBe("processing");
    expect((await db(table).where("id", Number(waiting?.job.id)).first()).status).toBe("pending");
  });

  it("a knex instance made without multipleStatements takes the statement-by-statement path, with the same results", async () => {
    const plain = knexFactory({ client: "mysql2", connection: { uri: url, supportBigNumbers: true, charset: "utf8mb4" } as never });
    try {
      const wq = await open({ knex: plain });
      const q = queue();
      await wq.enqueueBulk(q, [
        { name: "a", priority: 1 },
        { name: "b", priority: 2 },
        { name: "c", priority: 0 },
      ]);
      let taken: Job[] = [];
      const statements = await statementsOf(async () => {
        taken = await wq.reserve(q, { worker: "w", count: 2 });
      });
      // SET TRANSACTION, BEGIN, the two locking reads, the UPDATE, the read-back, COMMIT: each a statement of its own.
      expect(statements).toHaveLength(7);
      expect(statements.some((sql) => sql.replace(/;\s*$/, "").includes(";"))).toBe(false);
      expect(taken.map((job) => job.name)).toEqual(["b", "a"]);
      const chained = await completeAndReserve(wq, q, taken[0]?.id as string, { worker: "w" }, { worker: "w" });
      expect([chained.completed.state, chained.next.map((job) => job.name)]).toEqual(["completed", ["c"]]);
      expect((await wq.complete(q, taken[1]?.id as string, { worker: "w" })).state).toBe("completed");
      // Concurrent look-ups of a job's queues: one statement each, each answering its own id.
      if (!hasJobLookup(wq)) throw new Error("workerqueue-sql declares no JobLookup");
      await wq.enqueue(q, { name: "with id", id: "jid-plain" });
      let holders: string[][] = [];
      const lookUps = await statementsOf(async () => {
        holders = await Promise.all(["jid-plain", "no-such-job", "jid-plain"].map((id) => wq.queuesHolding(id)));
      });
      expect(lookUps.some((sql) => sql.replace(/;\s*$/, "").includes(";"))).toBe(false);
      expect(holders).toEqual([[q], [], [q]]);
    } finally {
      await Promise.all(backends.map((backend) => backend.close()));
      backends.length = 0;
      await plain.destroy();
    }
  });

  it("a script that fails inside its transaction is rolled back before its connection goes back to the pool", async () => {
    const one = knexFactory({
      client: "mysql2",
      connection: { uri: url, multipleStatements: true } as never,
      pool: { min: 1, max: 1 },
    });
    try {
      const { store } = resolveStore({ knex: one, table });
      const [probe] = await db(table).insert({ name: "locked-then-failed", status: "pending", locked_queue_id: "", attempts: 0 });
      await expect(
        sendScript(store, [
          { sql: `update ${table} set attempts = attempts + 1 where id = ?`, bindings: [probe as number] },
          { sql: `select * from ${table}_no_such_table`, bindings: [] },
        ]),
      ).rejects.toMatchObject({ errno: 1146 });
      // The same (only) connection: no transaction left open, the update undone, no lock held.
      const [[state]] = await one.raw("select @@in_transaction as open");
      expect(Number(state.open)).toBe(0);
      expect(
        Number(
          (
            await db(table)
              .where("id", probe as number)
              .first()
          ).attempts,
        ),
      ).toBe(0);
      await db(table)
        .where("id", probe as number)
        .update({ status: "error" });
    } finally {
      await one.destroy();
    }
  });
});

/**
 * The one-script claim under concurrency: Switchyard gateways (reserve of 1 to 3, and
 * completeAndReserve) and the legacy workqd claim (`UPDATE ... ORDER BY id LIMIT n`) race on one
 * table holding expired leases, due rows of the default queue with and without `sy_queue`, and
 * several priorities. Every job is handed out exactly once, and no claimer fails.
 */
describe("workerqueue-sql (mysql): one-script claims racing each other and the legacy claim", () => {
  const url = urlFor("mysql");
  const table = randomTable("wq_rt_race");
  const queue = "race-default";
  const db = knexFactory({ client: "mysql2", connection: url });
  const backends: Backend[] = [];

  afterAll(async () => {
    await Promise.all(backends.map((backend) => backend.close()));
    await db.schema.dropTableIfExists(table);
    await db.schema.dropTableIfExists(`${table}_paused_queues`);
    await db.schema.dropTableIfExists(`${table}_sy_recurring`);
    await db.destroy();
  });

  it("8 gateways reserving and completing (reserve + complete, completeAndReserve) 400 jobs never deadlock one another", async () => {
    const q = "race-no-deadlock";
    const errors: Array<{ errno?: number; message?: string }> = [];
    const gateways: Backend[] = [];
    const pools: Knex[] = [];
    for (let i = 0; i < 8; i++) {
      // Each gateway its own pool, as separate processes would have.
      const pool = knexFromUrl(url);
      pool.on("query-error", (error: { errno?: number; message?: string }) => errors.push(error));
      pools.push(pool);
      const gateway = createWorkerQueueBackend({ knex: pool, table, releaseDelayedEveryMs: 0 });
      gateways.push(gateway);
      await gateway.ready();
    }
    try {
      await gateways[0]?.enqueueBulk(
        q,
        Array.from({ length: 400 }, (_, i) => ({ name: `job-${i}`, priority: i % 5 })),
      );
      const done: string[] = [];
      await Promise.all(
        gateways.map(async (gateway, index) => {
          const worker = `g${index}`;
          if (index % 2 === 0) {
            for (;;) {
              const [job] = await gateway.reserve(q, { worker });
              if (!job) return;
              done.push((await gateway.complete(q, job.id, { worker })).id);
            }
          }
          let [held] = await gateway.reserve(q, { worker, count: 1 });
          while (held) {
            const { completed, next } = await completeAndReserve(gateway, q, held.id, { worker }, { worker });
            done.push(completed.id);
            held = next[0];
          }
        }),
      );
      expect(errors.map((error) => error.errno ?? error.message)).toEqual([]);
      expect(new Set(done).size).toBe(400);
      expect(done).toHaveLength(400);
    } finally {
      await Promise.all(gateways.map((gateway) => gateway.close()));
      await Promise.all(pools.map((pool) => pool.destroy()));
    }
  }, 120_000);

  it("gateways and workqd share 600 jobs (200 of them expired leases, 100 legacy rows): each is handed out once", async () => {
    for (let i = 0; i < 6; i++) {
      const backend = createWorkerQueueBackend({ url, table, defaultQueue: queue, releaseDelayedEveryMs: 0 });
      backends.push(backend);
      await backend.ready();
    }
    const [producer] = backends as [Backend];
    // 200 jobs held by a worker that went away (their leases have run out), then 300 due jobs and 100 legacy rows.
    await producer.enqueueBulk(
      queue,
      Array.from({ length: 200 }, (_, i) => ({ name: `expired-${i}`, priority: i % 3 })),
    );
    expect(await producer.reserve(queue, { worker: "gone", count: 200, leaseMs: 1 })).toHaveLength(200);
    await wait(5);
    await producer.enqueueBulk(
      queue,
      Array.from({ length: 300 }, (_, i) => ({ name: `due-${i}`, priority: i % 4 })),
    );
    await db(table).insert(
      Array.from({ length: 100 }, (_, i) => ({ name: `legacy-${i}`, status: "pending", locked_queue_id: "", attempts: 0 })),
    );

    // The default queue's rows: its own and the legacy ones (no sy_queue).
    const ofQueue = () => db(table).where((rows) => rows.where("sy_queue", queue).orWhereNull("sy_queue"));
    const handedOut: string[] = [];
    const legacyTaken: string[] = [];
    // A claim skips the rows another transaction has locked (workqd's scan locks every row it reads
    // until its commit), so an empty claim means "none free now": Switchyard's workers stop only once
    // no row is left for them, pending or with an expired lease (which only they may take).
    const nothingLeft = async () =>
      Number(
        (
          await ofQueue()
            .where((rows) =>
              rows
                .where("status", "pending")
                .orWhere((held) => held.where("status", "processing").where("sy_lease_until", "<", Date.now())),
            )
            .count({ n: "*" })
        )[0]?.n,
      ) === 0;
    const reserver = async (backend: Backend, index: number) => {
      for (;;) {
        const jobs = await backend.reserve(queue, { worker: `r${index}`, count: 1 + (index % 3) });
        if (jobs.length === 0 && (await nothingLeft())) return;
        handedOut.push(...jobs.map((job) => job.id));
      }
    };
    const chainer = async (backend: Backend, index: number) => {
      for (;;) {
        let [held] = await backend.reserve(queue, { worker: `c${index}` });
        if (!held && (await nothingLeft())) return;
        while (held) {
          handedOut.push(held.id);
          const { next } = await completeAndReserve(backend, queue, held.id, { worker: `c${index}` }, { worker: `c${index}` });
          held = next[0];
        }
      }
    };
    const legacyDb = knexFactory({ client: "mysql2", connection: url });
    const legacy = new LegacySql(legacyDb, "mysql", table);
    const workqd = async (index: number) => {
      for (let round = 0; ; round++) {
        const lock = `${index}-${round}`;
        try {
          await legacy.claim(lock, 2);
        } catch (error) {
          // A legacy claim may be chosen as a deadlock victim beside Switchyard's (README); it claims nothing that round.
          if ((error as { errno?: number }).errno === 1213) continue;
          throw error;
        }
        const rows = await legacy.claimed(lock, 2);
        if (rows.length === 0) return;
        legacyTaken.push(...rows.map((row) => String(row.id)));
      }
    };
    try {
      await Promise.all([
        ...backends.slice(0, 4).map((backend, i) => reserver(backend, i)),
        ...backends.slice(4).map((backend, i) => chainer(backend, i)),
        workqd(1),
        workqd(2),
      ]);
    } finally {
      await legacyDb.destroy();
    }
    const all = [...handedOut, ...legacyTaken];
    const counts = new Map<string, number>();
    for (const id of all) counts.set(id, (counts.get(id) ?? 0) + 1);
    expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
    const ids = (await ofQueue().select("id")).map((row: { id: number }) => String(row.id));
    // The legacy claim takes only rows whose lock is '': the 200 expired leases were Switchyard's to take again.
    expect(new Set(all)).toEqual(new Set(ids));
    expect(all).toHaveLength(600);
    const left = await ofQueue().where("status", "pending").count({ n: "*" });
    expect(Number(left[0]?.n)).toBe(0);
  }, 120_000);
});
