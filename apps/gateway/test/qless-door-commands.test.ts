import { createHash, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { qlessScriptSource } from "@switchyard/qless-redis";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { type Gateway, createGateway } from "../src/index.js";
import { type RunningServer, startServer } from "../src/server.js";
import { send, until } from "./helpers.js";

/**
 * qless's queue, failure, tracking, timeout and worker commands on a store that is not qless-redis
 * (issue 16): pause/unpause, failed, unfail, requeue, timeout, track, workers and worker.deregister.
 * Through the qless HTTP door each scenario runs on a qless-redis queue (the real script answers) and
 * on a SQLite queue (translated onto the Backend contract) of one gateway, and the replies must agree
 * once jids, worker, group and queue names are in common form; the SQLite rows are read directly
 * where a command moves a job. Through the RESP door, a qless client's calls onto SQLite alone.
 */
const redisUrl = `${serviceUrl("redis").replace(/\/\d*$/, "")}/9`;
const dir = mkdtempSync(join(tmpdir(), "switchyard-qless-commands-"));
const sqliteFile = join(dir, "door.sqlite");
const respFile = join(dir, "resp.sqlite");
let gateway: Gateway;
let resp: RunningServer;
const QLESS = qlessScriptSource();
const QLESS_SHA = createHash("sha1").update(QLESS).digest("hex");
const clients: Redis[] = [];

beforeAll(async () => {
  gateway = await createGateway({
    config: {
      backends: { ql: { type: "qless-redis", url: redisUrl }, sql: { type: "workerqueue-sql", url: `sqlite:${sqliteFile}` } },
      routes: [
        { pattern: "sql-*", backend: "sql" },
        { pattern: "*", backend: "ql" },
      ],
    },
    env: {},
  });
  resp = await startServer({
    config: { backends: { main: { type: "workerqueue-sql", url: `sqlite:${respFile}` } }, doors: { resp: { port: 0 } } },
    port: 0,
    host: "127.0.0.1",
    env: {},
  });
});
afterAll(async () => {
  for (const redis of clients) redis.disconnect();
  await Promise.all([gateway?.close(), resp?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

/** Probe: the SQLite rows of a queue, read from the file, not through the adapter. */
function rows(file: string, queue: string): Array<Record<string, unknown>> {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare("select * from jobs where sy_queue = ? order by id").all(queue) as Array<Record<string, unknown>>;
  } finally {
    db.close();
  }
}
function pausedQueues(file: string): string[] {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare("select queue from jobs_paused_queues order by queue").all() as Array<{ queue: string }>).map((row) => row.queue);
  } finally {
    db.close();
  }
}

const STORES = ["ql", "sql"] as const;
type Store = (typeof STORES)[number];

/** One run of a scenario: its queues, fresh names, and the qless door with a queue in every body. */
function run(store: Store) {
  const queue = `${store}-${randomUUID().slice(0, 8)}`;
  const other = `${queue}-b`;
  const names = new Map<string, string>();
  /** A jid, worker or group name of this run only (qless-redis keeps workers, groups and tracking global). */
  const name = (label: string) => {
    if (!names.has(label)) names.set(label, `${label}-${randomUUID().slice(0, 8)}`);
    return names.get(label)!;
  };
  const qlessIn = async (bodyQueue: string, command: string, args: Array<string | number>) => {
    const res = await send(gateway, "POST", `/qless/${command}`, { queue: bodyQueue, args });
    return { status: res.status, body: res.json };
  };
  const qless = (command: string, args: Array<string | number>) => qlessIn(queue, command, args);
  const error = async (command: string, args: Array<string | number>) => {
    const res = await qless(command, args);
    return [res.status, res.body.error?.message];
  };
  /** Names and queues in a common form, so the two stores' replies compare equal. */
  const common = (value: unknown): unknown =>
    JSON.parse(
      [...names]
        .reduce((text, [label, id]) => text.replaceAll(id, `<${label}>`), JSON.stringify(value))
        .replaceAll(other, "<other>")
        .replaceAll(queue, "<queue>"),
    );
  const put = (label: string, ...options: Array<string | number>) =>
    qless("put", ["client", queue, name(label), "K", JSON.stringify({ label }), 0, ...options]);
  return { store, queue, other, name, qless, qlessIn, error, common, put };
}
type Run = ReturnType<typeof run>;

/** Runs the scenario on both stores and expects the same outcome from each; answers it (in common form). */
async function sameOnBoth(scenario: (r: Run) => Promise<unknown>): Promise<unknown> {
  const [onQless, onSql] = await Promise.all(
    STORES.map(async (store) => {
      const r = run(store);
      return r.common(await scenario(r));
    }),
  );
  expect(onSql).toEqual(onQless);
  return onQless;
}

/** Lets the clock move on, so the next command is seen later than the last (qless orders by that time). */
async function tick(): Promise<void> {
  const at = Date.now();
  await until(() => Date.now() > at + 1, "the clock to move on");
}

describe("qless door: queue, failure, tracking, timeout and worker commands answer as qless's script on a core store", () => {
  it("pause stops pops (and does not note the popping worker), queues says paused, unpause lets the jobs out", async () => {
    const seen = await sameOnBoth(async (r) => {
      await r.put("job");
      const paused = await r.qless("pause", [r.queue, r.other]);
      const pop = await r.qless("pop", [r.queue, r.name("paused-worker"), 5]);
      const peek = (await r.qless("peek", [r.queue, 5])).body.reply.map((job: { jid: string }) => job.jid);
      const counts = (await r.qless("queues", [r.queue])).body.reply;
      const workers = (await r.qless("workers", [])).body.reply;
      const sqlPaused = r.store === "sql" ? pausedQueues(sqliteFile).filter((q) => q.startsWith(r.queue)) : [r.queue, r.other];
      const unpaused = await r.qless("unpause", [r.queue]);
      const popped = (await r.qless("pop", [r.queue, r.name("worker"), 5])).body.reply.map((job: { jid: string }) => job.jid);
      const stillPaused = (await r.qless("queues", [r.other])).body.reply.paused;
      return {
        paused: paused.body,
        pop: pop.body,
        peek,
        counts,
        pausedWorkerNoted: Array.isArray(workers) && workers.some((w: { name: string }) => w.name === r.name("paused-worker")),
        sqlPaused,
        unpaused: unpaused.body,
        popped,
        stillPaused,
      };
    });
    expect(seen).toEqual({
      paused: { reply: null },
      pop: { reply: {} },
      peek: ["<job>"],
      counts: { name: "<queue>", paused: true, waiting: 1, running: 0, scheduled: 0, depends: 0, stalled: 0, recurring: 0 },
      pausedWorkerNoted: false,
      sqlPaused: ["<queue>", "<other>"],
      unpaused: { reply: null },
      popped: ["<job>"],
      stillPaused: true,
    });
  });

  it("pause, unpause and worker.deregister given nothing are refused in Redis's words", async () => {
    const seen = await sameOnBoth(async (r) => ({
      pause: await r.error("pause", []),
      unpause: await r.error("unpause", []),
      deregister: await r.error("worker.deregister", []),
    }));
    const refused = [400, "Wrong number of args calling Redis command from script"];
    expect(seen).toEqual({ pause: refused, unpause: refused, deregister: refused });
  });

  it("failed counts jobs by group and pages a group's jids newest failure first; bad numbers are qless's errors", async () => {
    const seen = await sameOnBoth(async (r) => {
      for (const label of ["f1", "f2", "f3"]) await r.put(label);
      await r.qless("pop", [r.queue, "w", 3]);
      await r.qless("fail", [r.name("f1"), "w", r.name("grpA"), "boom"]);
      await tick();
      await r.qless("fail", [r.name("f2"), "w", r.name("grpA"), "second"]);
      await tick();
      await r.qless("fail", [r.name("f3"), "w", r.name("grpB"), "third"]);
      const all = (await r.qless("failed", [])).body.reply;
      return {
        // qless-redis's groups are global: only this run's are compared.
        ours: [all[r.name("grpA")], all[r.name("grpB")]],
        groupA: (await r.qless("failed", [r.name("grpA")])).body,
        paged: (await r.qless("failed", [r.name("grpA"), 1, 1])).body,
        unknown: (await r.qless("failed", [r.name("nothing")])).body,
        badStart: await r.error("failed", [r.name("grpA"), "first"]),
        badLimit: await r.error("failed", [r.name("grpA"), 0, "many"]),
      };
    });
    expect(seen).toMatchObject({
      ours: [2, 1],
      groupA: { reply: { total: 2, jobs: ["<f2>", "<f1>"] } },
      paged: { reply: { total: 2, jobs: ["<f1>"] } },
      unknown: { reply: { total: 0, jobs: {} } },
      badStart: [400, 'Failed(): Arg "start" is not a number: first'],
      badLimit: [400, 'Failed(): Arg "limit" is not a number: many'],
    });
  });

  it("unfail puts the oldest failures of a group back to waiting, into the queue it names (moving them there)", async () => {
    const seen = await sameOnBoth(async (r) => {
      for (const label of ["f1", "f2", "f3"]) await r.put(label, "retries", 2);
      await r.qless("pop", [r.queue, "w", 3]);
      for (const label of ["f1", "f2", "f3"]) {
        await r.qless("fail", [r.name(label), "w", r.name("grp"), `failed ${label}`]);
        await tick();
      }
      const first = await r.qless("unfail", [r.queue, r.name("grp"), 1]);
      const f1 = (await r.qless("get", [r.name("f1")])).body.reply;
      const left = (await r.qless("failed", [r.name("grp")])).body.reply;
      // Into another queue: qless moves the job (its jids are global); here it is put there and removed from the old queue.
      const moved = await r.qless("unfail", [r.other, r.name("grp"), 1]);
      const f2 = (await r.qlessIn(r.other, "get", [r.name("f2")])).body.reply;
      const sqlRows =
        r.store === "sql"
          ? {
              old: rows(sqliteFile, r.queue).map((row) => [row.sy_job_id, row.status]),
              other: rows(sqliteFile, r.other).map((row) => [row.sy_job_id, row.status]),
            }
          : {
              old: [
                [r.name("f1"), "pending"],
                [r.name("f3"), "error"],
              ],
              other: [[r.name("f2"), "pending"]],
            };
      const popped = (await r.qlessIn(r.other, "pop", [r.other, "w2", 1])).body.reply[0];
      const rest = await r.qless("unfail", [r.queue, r.name("grp")]);
      const none = await r.qless("unfail", [r.queue, r.name("grp"), 5]);
      return {
        first: first.body,
        f1: [f1.state, f1.queue, f1.worker, f1.remaining],
        left,
        moved: moved.body,
        f2: [f2.state, f2.queue, f2.klass, f2.data, f2.remaining],
        sqlRows,
        popped: [popped.jid, popped.queue],
        rest: rest.body,
        none: none.body,
        groups: (await r.qless("failed", [])).body.reply[r.name("grp")] ?? null,
        errors: [await r.error("unfail", [r.queue]), await r.error("unfail", [r.queue, r.name("grp"), "all"])],
      };
    });
    expect(seen).toEqual({
      first: { reply: 1 },
      f1: ["waiting", "<queue>", "", 2],
      left: { total: 2, jobs: ["<f3>", "<f2>"] },
      moved: { reply: 1 },
      f2: ["waiting", "<other>", "K", '{"label":"f2"}', 2],
      sqlRows: {
        old: [
          ["<f1>", "pending"],
          ["<f3>", "error"],
        ],
        other: [["<f2>", "pending"]],
      },
      popped: ["<f2>", "<other>"],
      rest: { reply: 1 },
      none: { reply: 0 },
      groups: null,
      errors: [
        [400, 'Unfail(): Arg "group" missing'],
        [400, 'Unfail(): Arg "count" not a number: all'],
      ],
    });
  });

  it("requeue puts an existing job again (taken from its worker), moves it into another queue, and refuses a missing one", async () => {
    const seen = await sameOnBoth(async (r) => {
      await r.put("job");
      await r.qless("pop", [r.queue, "w1", 1]);
      const again = await r.qless("requeue", ["w2", r.queue, r.name("job"), "K2", '{"v":2}', 0, "priority", 3]);
      const job = (await r.qless("get", [r.name("job")])).body.reply;
      const lost = await r.error("heartbeat", [r.name("job"), "w1"]);
      const badDelay = await r.error("requeue", ["w2", r.queue, r.name("job"), "K3", "{}", "soon"]);
      const unchanged = (await r.qless("get", [r.name("job")])).body.reply.klass;
      const moved = await r.qless("requeue", ["w2", r.other, r.name("job"), "K4", '{"v":4}', 0]);
      const there = (await r.qlessIn(r.other, "get", [r.name("job")])).body.reply;
      const sqlRows =
        r.store === "sql"
          ? [
              rows(sqliteFile, r.queue).map((row) => row.status),
              rows(sqliteFile, r.other).map((row) => [row.sy_job_id, row.status, row.name]),
            ]
          : [["error"], [[r.name("job"), "pending", "K4"]]];
      const missing = await r.error("requeue", ["w2", r.queue, r.name("nope"), "K", "{}", 0]);
      const noJid = await r.error("requeue", ["w2", r.queue]);
      const sqlMissing = r.store === "sql" ? rows(sqliteFile, r.queue).some((row) => row.sy_job_id === r.name("nope")) : false;
      return {
        again: again.body,
        job: [job.klass, job.data, job.priority, job.state, job.worker, job.queue],
        lost: lost[0],
        badDelay,
        unchanged,
        moved: moved.body,
        there: [there.klass, there.data, there.state, there.queue],
        sqlRows,
        missing,
        noJid,
        sqlMissing,
      };
    });
    expect(seen).toEqual({
      again: { reply: "<job>" },
      job: ["K2", '{"v":2}', 3, "waiting", "", "<queue>"],
      lost: 400,
      badDelay: [400, 'Put(): Arg "delay" not a number: soon'],
      unchanged: "K2",
      moved: { reply: "<job>" },
      there: ["K4", '{"v":4}', "waiting", "<other>"],
      // The old queue's row is canceled (status `error`, qless's view: gone); the new one waits.
      sqlRows: [["error"], [["<job>", "pending", "K4"]]],
      missing: [400, "Requeue(): Job <nope> does not exist"],
      noJid: [400, "Job(): no jid provided"],
      sqlMissing: false,
    });
  });

  it("timeout takes a running job from its worker: stalled, refused to that worker, and popped first by the next", async () => {
    const seen = await sameOnBoth(async (r) => {
      await r.put("slow", "priority", 1);
      await r.qless("pop", [r.queue, "w1", 1]);
      await r.put("urgent", "priority", 5);
      const timeout = await r.qless("timeout", [r.name("slow")]);
      const slow = (await r.qless("get", [r.name("slow")])).body.reply;
      const refused = [
        await r.error("heartbeat", [r.name("slow"), "w1"]),
        await r.error("complete", [r.name("slow"), "w1", r.queue, "{}"]),
        await r.error("fail", [r.name("slow"), "w1", "g", "m"]),
        await r.error("retry", [r.name("slow"), r.queue, "w1"]),
      ];
      const counts = (await r.qless("queues", [r.queue])).body.reply;
      const listed = [(await r.qless("jobs", ["running", r.queue])).body.reply, (await r.qless("jobs", ["stalled", r.queue])).body.reply];
      const again = await r.error("timeout", [r.name("slow")]);
      const missing = await r.error("timeout", [r.name("nope")]);
      const waiting = await r.error("timeout", [r.name("urgent")]);
      // A timed-out job is popped before the waiting ones, its priority notwithstanding.
      const popped = (await r.qless("pop", [r.queue, "w2", 1])).body.reply[0];
      const sqlRow =
        r.store === "sql"
          ? rows(sqliteFile, r.queue)
              .filter((row) => row.sy_job_id === r.name("slow"))
              .map((row) => [row.status, row.sy_worker])
          : [["processing", "w2"]];
      const completed = await r.qless("complete", [r.name("slow"), "w2", r.queue, "{}"]);
      return {
        timeout: timeout.body,
        slow: [slow.state, slow.worker, slow.expires],
        refused,
        counts: [counts.waiting, counts.running, counts.stalled],
        listed,
        again,
        missing,
        waiting,
        popped: [popped.jid, popped.state, popped.worker],
        sqlRow,
        completed: completed.body,
      };
    });
    expect(seen).toEqual({
      timeout: { reply: null },
      slow: ["stalled", "w1", 0],
      refused: [
        [400, "Heartbeat(): Job <slow> not currently running: stalled"],
        [400, "Complete(): Job <slow> is not currently running: stalled"],
        [400, "Fail(): Job <slow>not currently running: stalled"],
        [400, "Retry(): Job <slow> is not currently running: stalled"],
      ],
      counts: [2, 0, 0],
      listed: [[], []],
      again: [400, "Timeout(): Job <slow> not running"],
      missing: [400, "Timeout(): Job <nope> does not exist"],
      waiting: [400, "Timeout(): Job <urgent> not running"],
      popped: ["<slow>", "running", "w2"],
      sqlRow: [["processing", "w2"]],
      completed: { reply: "complete" },
    });
  });

  it("timeout of several jids checks them all before it takes any (a SQLite store)", async () => {
    const r = run("sql");
    await r.put("a");
    await r.qless("pop", [r.queue, "w", 1]);
    expect(await r.error("timeout", [r.name("a"), r.name("nope")])).toEqual([400, `Timeout(): Job ${r.name("nope")} does not exist`]);
    expect((await r.qless("get", [r.name("a")])).body.reply).toMatchObject({ state: "running", worker: "w" });
    expect(rows(sqliteFile, r.queue).map((row) => [row.status, Number(row.sy_lease_until) > Date.now()])).toEqual([["processing", true]]);
  });

  it("track marks a job (tracked in its JSON), lists tracked jobs and the jids no longer held; qless's errors", async () => {
    const seen = await sameOnBoth(async (r) => {
      await r.put("tr1");
      await r.put("tr2");
      const tracked = [
        (await r.qless("track", ["track", r.name("tr1")])).body,
        (await r.qless("track", ["track", r.name("tr1")])).body,
        (await r.qless("track", ["TRACK", r.name("tr2")])).body,
      ];
      const flags = [(await r.qless("get", [r.name("tr1")])).body.reply.tracked, (await r.qless("peek", [r.queue, 5])).body.reply];
      await r.qless("cancel", [r.name("tr2")]);
      const ours = (list: unknown) => (Array.isArray(list) ? list : []);
      const listing = (await r.qless("track", [])).body.reply;
      const untracked = [
        (await r.qless("track", ["untrack", r.name("tr1")])).body,
        (await r.qless("track", ["untrack", r.name("tr1")])).body,
      ];
      const after = (await r.qless("get", [r.name("tr1")])).body.reply.tracked;
      return {
        tracked,
        flags: [flags[0], flags[1].map((job: { jid: string; tracked: boolean }) => [job.jid, job.tracked])],
        // qless-redis's tracked set is global: only this run's jobs are compared.
        jobs: ours(listing.jobs)
          .filter((job: { jid: string }) => [r.name("tr1"), r.name("tr2")].includes(job.jid))
          .map((job: { jid: string; tracked: boolean; state: string }) => [job.jid, job.tracked, job.state]),
        expired: ours(listing.expired).filter((jid: string) => jid === r.name("tr2")),
        untracked,
        after,
        errors: [
          await r.error("track", ["track", r.name("nope")]),
          await r.error("track", ["bogus", r.name("tr1")]),
          await r.error("track", ["track"]),
        ],
      };
    });
    expect(seen).toEqual({
      tracked: [{ reply: 1 }, { reply: 0 }, { reply: 1 }],
      flags: [
        true,
        [
          ["<tr1>", true],
          ["<tr2>", true],
        ],
      ],
      jobs: [["<tr1>", true, "waiting"]],
      expired: ["<tr2>"],
      untracked: [{ reply: 1 }, { reply: 0 }],
      after: false,
      errors: [
        [400, "Track(): Job does not exist"],
        [400, 'Track(): Unknown action "bogus"'],
        [400, 'Track(): Arg "jid" missing'],
      ],
    });
  });

  it("workers lists who popped, most recent first, with running and stalled counts; workers <name> its jids; worker.deregister", async () => {
    const seen = await sameOnBoth(async (r) => {
      const [wa, wb, wc] = [r.name("wa"), r.name("wb"), r.name("wc")];
      for (const label of ["j1", "j2", "j3"]) await r.put(label);
      await r.qless("pop", [r.queue, wa, 1]);
      await tick();
      await r.qless("pop", [r.queue, wb, 2]);
      await tick();
      // A pop that finds nothing still notes the worker.
      await r.qless("pop", [r.queue, wc, 1]);
      const ours = (list: Array<{ name: string }>) => list.filter((w) => [wa, wb, wc].includes(w.name));
      const listed = ours((await r.qless("workers", [])).body.reply);
      const ofB = (await r.qless("workers", [wb])).body.reply;
      const nobody = (await r.qless("workers", [r.name("nobody")])).body.reply;
      const [first] = ofB.jobs;
      await r.qless("complete", [first, wb, r.queue, "{}"]);
      const afterComplete = ours((await r.qless("workers", [])).body.reply).find((w) => w.name === wb);
      const deregistered = await r.qless("worker.deregister", [wb, r.name("nobody")]);
      const afterDeregister = ours((await r.qless("workers", [])).body.reply).map((w) => w.name);
      return {
        listed,
        ofB: { jobs: [...ofB.jobs].sort(), stalled: ofB.stalled },
        nobody,
        afterComplete,
        deregistered: deregistered.body,
        afterDeregister,
      };
    });
    expect(seen).toEqual({
      listed: [
        { name: "<wc>", jobs: 0, stalled: 0 },
        { name: "<wb>", jobs: 2, stalled: 0 },
        { name: "<wa>", jobs: 1, stalled: 0 },
      ],
      ofB: { jobs: ["<j2>", "<j3>"], stalled: {} },
      nobody: { jobs: {}, stalled: {} },
      afterComplete: { name: "<wb>", jobs: 1, stalled: 0 },
      deregistered: { reply: null },
      afterDeregister: ["<wc>", "<wa>"],
    });
  });

  it("workers counts a job whose lock ran out as the worker's stalled job, until another worker takes it", async () => {
    const seen = await sameOnBoth(async (r) => {
      const wa = r.name("wa");
      await r.qless("config.set", [`${r.queue}-heartbeat`, 1]);
      await r.put("job");
      await r.qless("pop", [r.queue, wa, 1]);
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      const stalled = [(await r.qless("workers", [wa])).body.reply, (await r.qless("jobs", ["stalled", r.queue])).body.reply];
      const listed = ((await r.qless("workers", [])).body.reply as Array<{ name: string }>).find((w) => w.name === wa);
      const row =
        r.store === "sql"
          ? rows(sqliteFile, r.queue).map((probe) => [probe.sy_worker, Number(probe.sy_lease_until) < Date.now()])
          : [[wa, true]];
      await r.qless("config.unset", [`${r.queue}-heartbeat`]);
      return { stalled, listed, row };
    });
    expect(seen).toEqual({
      stalled: [{ jobs: {}, stalled: ["<job>"] }, ["<job>"]],
      listed: { name: "<wa>", jobs: 0, stalled: 1 },
      row: [["<wa>", true]],
    });
  });

  it("tag get lists a tag's jobs by put time, ties by jid, and leaves out a canceled job (qless deletes it)", async () => {
    const seen = await sameOnBoth(async (r) => {
      const tag = r.name("tag");
      // Both put at the same `now`: qless's tag set orders the tie by jid, "a-..." before "b-...".
      for (const label of ["b", "a"]) {
        const put = ["client", r.queue, r.name(label), "K", "{}", 0, "tags", JSON.stringify([tag])];
        expect((await send(gateway, "POST", "/qless/put", { queue: r.queue, now: 1_700_000_000, args: put })).status).toBe(200);
      }
      const both = (await r.qless("tag", ["get", tag])).body.reply;
      await r.qless("cancel", [r.name("a")]);
      const afterCancel = (await r.qless("tag", ["get", tag])).body.reply;
      return { both, afterCancel };
    });
    expect(seen).toEqual({ both: { total: 2, jobs: ["<a>", "<b>"] }, afterCancel: { total: 1, jobs: ["<b>"] } });
  });
});

describe("RESP door: the same commands from a qless client onto SQLite", () => {
  const connect = async () => {
    const redis = new Redis({ port: resp.respPort as number, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0 });
    clients.push(redis);
    await redis.connect();
    await redis.script("LOAD", QLESS);
    return redis;
  };
  const now = () => String(Date.now() / 1000);
  const ql = (redis: Redis, command: string, ...args: Array<string | number>) => redis.evalsha(QLESS_SHA, 0, command, now(), ...args);
  const json = async (pending: Promise<unknown>) => JSON.parse((await pending) as string);

  it("pause and unpause, failed and unfail, with the rows probed in SQLite", async () => {
    const redis = await connect();
    const q = `rq-${randomUUID().slice(0, 6)}`;
    for (const jid of ["r1", "r2"]) await ql(redis, "put", "c", q, `${q}-${jid}`, "K", "{}", 0);
    expect(await ql(redis, "pause", q)).toBeNull();
    expect(pausedQueues(respFile)).toContain(q);
    expect(await ql(redis, "pop", q, "w", 2)).toBe("{}");
    expect((await json(ql(redis, "queues", q))).paused).toBe(true);
    expect(await ql(redis, "unpause", q)).toBeNull();
    expect(pausedQueues(respFile)).not.toContain(q);
    expect(await json(ql(redis, "pop", q, "w", 2))).toHaveLength(2);
    await ql(redis, "fail", `${q}-r1`, "w", `${q}-boom`, "it broke");
    await ql(redis, "fail", `${q}-r2`, "w", `${q}-boom`, "it broke again");
    // JSON text as the script answers: counts by group, then a group's jids newest first.
    expect(await json(ql(redis, "failed"))).toMatchObject({ [`${q}-boom`]: 2 });
    expect(await ql(redis, "failed", `${q}-boom`, 0, 1)).toBe(JSON.stringify({ total: 2, jobs: [`${q}-r2`] }));
    expect(await ql(redis, "failed", "no-such-group")).toBe('{"total":0,"jobs":{}}');
    expect(await ql(redis, "unfail", q, `${q}-boom`, 10)).toBe(2);
    expect(rows(respFile, q).map((row) => row.status)).toEqual(["pending", "pending"]);
    await expect(ql(redis, "unfail", q)).rejects.toThrow('Unfail(): Arg "group" missing');
    await expect(ql(redis, "pause")).rejects.toThrow("Wrong number of args calling Redis command from script");
  });

  it("requeue moves a job into another queue, and the job's later commands find it there", async () => {
    const redis = await connect();
    const q = `rq-${randomUUID().slice(0, 6)}`;
    const jid = `${q}-job`;
    await ql(redis, "put", "c", q, jid, "K", "{}", 0);
    expect(await ql(redis, "requeue", "c", `${q}-next`, jid, "K2", '{"n":1}', 0)).toBe(jid);
    expect(rows(respFile, q).map((row) => row.status)).toEqual(["error"]);
    expect(rows(respFile, `${q}-next`).map((row) => [row.sy_job_id, row.name, row.status])).toEqual([[jid, "K2", "pending"]]);
    // get names only the jid: the door sends it to the queue the job moved to.
    expect(await json(ql(redis, "get", jid))).toMatchObject({ queue: `${q}-next`, klass: "K2", state: "waiting" });
    await expect(ql(redis, "requeue", "c", q, `${q}-nope`, "K", "{}", 0)).rejects.toThrow(`Requeue(): Job ${q}-nope does not exist`);
    expect(rows(respFile, q)).toHaveLength(1);
  });

  it("timeout of jids in two queues, track with its listing, workers and worker.deregister", async () => {
    const redis = await connect();
    const q = `rq-${randomUUID().slice(0, 6)}`;
    const worker = `${q}-worker`;
    await ql(redis, "put", "c", q, `${q}-a`, "K", "{}", 0);
    await ql(redis, "put", "c", `${q}-2`, `${q}-b`, "K", "{}", 0);
    expect(await ql(redis, "track", "track", `${q}-a`)).toBe("1");
    expect((await json(ql(redis, "pop", q, worker, 1)))[0]).toMatchObject({ jid: `${q}-a`, tracked: true });
    await ql(redis, "pop", `${q}-2`, worker, 1);
    const mine = await json(ql(redis, "workers", worker));
    expect([...mine.jobs].sort()).toEqual([`${q}-a`, `${q}-b`]);
    expect(mine.stalled).toEqual({});
    // Both jids, each in its own queue, timed out by one call.
    expect(await ql(redis, "timeout", `${q}-a`, `${q}-b`)).toBeNull();
    expect(await json(ql(redis, "get", `${q}-b`))).toMatchObject({ state: "stalled", worker, expires: 0 });
    await expect(ql(redis, "heartbeat", `${q}-a`, worker)).rejects.toThrow(`Heartbeat(): Job ${q}-a not currently running: stalled`);
    await expect(ql(redis, "timeout", `${q}-a`, `${q}-nope`)).rejects.toThrow(`Timeout(): Job ${q}-nope does not exist`);
    expect((await json(ql(redis, "pop", q, "other-worker", 1)))[0]).toMatchObject({ jid: `${q}-a`, worker: "other-worker" });
    expect(rows(respFile, q).map((row) => [row.status, row.sy_worker])).toEqual([["processing", "other-worker"]]);
    const listing = await json(ql(redis, "track"));
    expect(listing.jobs.map((job: { jid: string; tracked: boolean }) => [job.jid, job.tracked])).toContainEqual([`${q}-a`, true]);
    const workers = await json(ql(redis, "workers"));
    expect(workers.map((entry: { name: string }) => entry.name)).toContain(worker);
    expect(await ql(redis, "worker.deregister", worker)).toBeNull();
    const after = await ql(redis, "workers");
    expect(after === "{}" ? [] : JSON.parse(after as string).map((entry: { name: string }) => entry.name)).not.toContain(worker);
    await expect(ql(redis, "track", "track", `${q}-missing`)).rejects.toThrow("Track(): Job does not exist");
    await expect(ql(redis, "timeout", `${q}-missing`)).rejects.toThrow(`Timeout(): Job ${q}-missing does not exist`);
  });
});
