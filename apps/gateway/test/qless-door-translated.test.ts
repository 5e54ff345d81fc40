import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { type Gateway, createGateway } from "../src/index.js";
import { send, until } from "./helpers.js";

/**
 * The qless door on a store that is not qless answers as qless does. Every scenario runs twice on
 * one gateway: on a queue of the qless-redis backend, where the real qless script answers, and on a
 * queue of a SQLite workerqueue-sql backend, where the door translates onto the Backend contract;
 * the two replies must agree (once jids and queue names are put in common form).
 */
const redisUrl = `${serviceUrl("redis").replace(/\/\d*$/, "")}/9`;
const dir = mkdtempSync(join(tmpdir(), "switchyard-qless-translated-"));
let gateway: Gateway;

beforeAll(async () => {
  gateway = await createGateway({
    config: {
      backends: { ql: { type: "qless-redis", url: redisUrl }, sql: { type: "workerqueue-sql", url: `sqlite:${join(dir, "door.sqlite")}` } },
      routes: [
        { pattern: "sql-*", backend: "sql" },
        { pattern: "*", backend: "ql" },
      ],
    },
    env: {},
  });
});
afterAll(async () => {
  await gateway?.close();
  rmSync(dir, { recursive: true, force: true });
});

const STORES = ["ql", "sql"] as const;
type Store = (typeof STORES)[number];

/** One run of a scenario: its queue, fresh jids, and the qless door with the queue in every body. */
function run(store: Store) {
  const queue = `${store === "sql" ? "sql" : "ql"}-${randomUUID().slice(0, 8)}`;
  const jids = new Map<string, string>();
  const jid = (name: string) => {
    if (!jids.has(name)) jids.set(name, `${name}-${randomUUID().slice(0, 8)}`);
    return jids.get(name)!;
  };
  /** One command, at the client's `now` (seconds) when given, else the gateway's clock. */
  const qless = async (command: string, args: Array<string | number>, now?: number) => {
    const res = await send(gateway, "POST", `/qless/${command}`, now === undefined ? { queue, args } : { queue, args, now });
    return { status: res.status, body: res.json };
  };
  /** Jids and the queue name in a common form, so the two stores' replies compare equal. */
  const common = (value: unknown): unknown =>
    JSON.parse(
      [...jids].reduce((text, [name, id]) => text.replaceAll(id, `<${name}>`), JSON.stringify(value)).replaceAll(queue, "<queue>"),
    );
  return { queue, jid, qless, common };
}

/** Runs the scenario on both stores and expects the same outcome from each. */
async function sameOnBoth(scenario: (r: ReturnType<typeof run>) => Promise<unknown>): Promise<unknown> {
  const [onQless, onSql] = await Promise.all(
    STORES.map(async (store) => {
      const r = run(store);
      return r.common(await scenario(r));
    }),
  );
  expect(onSql).toEqual(onQless);
  return onQless;
}

const put = (r: ReturnType<typeof run>, name: string, klass: string, data: unknown, ...options: Array<string | number>) =>
  r.qless("put", ["client", r.queue, r.jid(name), klass, JSON.stringify(data), 0, ...options]);

describe("qless door: translated commands answer as qless's own script", () => {
  it("peek lists waiting jobs in claim order: higher priority first, then the earlier put", async () => {
    const seen = await sameOnBoth(async (r) => {
      await put(r, "low", "Low", {});
      await put(r, "high", "High", {}, "priority", 5);
      await put(r, "high2", "High2", {}, "priority", 5);
      const peek = await r.qless("peek", [r.queue, 10]);
      return peek.body.reply.map((job: { klass: string }) => job.klass);
    });
    expect(seen).toEqual(["High", "High2", "Low"]);
  });

  it("bad arguments are refused in qless's words and order, JSON in cjson's own, before the job is looked for", async () => {
    const seen = await sameOnBoth(async (r) => {
      await put(r, "job", "K", {});
      await r.qless("pop", [r.queue, "worker-1", 1]);
      const refusal = async (command: string, args: Array<string | number>) => (await r.qless(command, args)).body.error.message;
      return [
        await refusal("put", ["client", r.queue, r.jid("new"), "K", "{bad", 0]),
        await refusal("put", ["client", r.queue, r.jid("new"), "K", "false", 0]),
        await refusal("put", ["client", r.queue, r.jid("new"), "K", "{}", 0, "tags", "false"]),
        await refusal("put", ["client", r.queue, r.jid("new"), "K", "{}", 0, "priority", "high"]),
        await refusal("put", ["client", r.queue, r.jid("new"), "K", "[1,]", 0, "priority", "high"]),
        await refusal("complete", [r.jid("job"), "worker-1", r.queue]),
        await refusal("complete", [r.jid("job"), "worker-1", r.queue, '{"a":1 "b"}']),
        await refusal("complete", [r.jid("job"), "worker-1", r.queue, "{}", "next", r.queue, "delay", "soon"]),
        await refusal("complete", [r.jid("none"), "worker-1", r.queue, "{x"]),
        await refusal("heartbeat", [r.jid("job"), "worker-1", "[1 2]"]),
        await refusal("fail", [r.jid("job"), "worker-1", "group", "message", '"unterminated']),
        await refusal("log", [r.jid("job"), "note", "false"]),
      ];
    });
    expect(seen).toEqual([
      "Expected object key string but found invalid token at character 2",
      'Put(): Arg "data" missing or not JSON: false',
      'Put(): Arg "tags" not JSONfalse',
      'Put(): Arg "priority" not a numberhigh',
      "Expected value but found T_ARR_END at character 4",
      "bad argument #1 to 'decode' (string expected, got nil)",
      "Expected comma or object end but found T_STRING at character 8",
      "assertion failed!",
      "Expected object key string but found invalid token at character 2",
      "Expected comma or array end but found T_NUMBER at character 4",
      "Expected value but found unexpected end of string at character 14",
      "Log(): Argument 'data' not cjson: false",
    ]);
  });

  it("put of an existing jid puts the job again: new klass, data and priority, waiting, taken from its worker", async () => {
    const seen = await sameOnBoth(async (r) => {
      await put(r, "job", "Old", { v: 1 });
      await r.qless("pop", [r.queue, "worker-1", 1]);
      const again = await put(r, "job", "New", { v: 2 }, "priority", 3);
      const job = (await r.qless("get", [r.jid("job")])).body.reply;
      const lost = await r.qless("heartbeat", [r.jid("job"), "worker-1", "{}"]);
      // The old worker's heartbeat is refused (qless: 400 with its message; a core store: 409 LEASE_LOST).
      return { again: again.body, job: [job.klass, job.data, job.priority, job.state, job.worker], refused: lost.status >= 400 };
    });
    expect(seen).toEqual({ again: { reply: "<job>" }, job: ["New", '{"v":2}', 3, "waiting", ""], refused: true });
  });

  it("config.set <queue>-heartbeat sets the lock a pop gives and a heartbeat renews; config.unset goes back to heartbeat's 60 s", async () => {
    const seen = await sameOnBoth(async (r) => {
      const key = `${r.queue}-heartbeat`;
      const set = await r.qless("config.set", [key, 120]);
      const got = await r.qless("config.get", [key]);
      await put(r, "job", "K", {});
      const before = Date.now() / 1000;
      const popped = (await r.qless("pop", [r.queue, "w", 1])).body.reply[0];
      const unset = await r.qless("config.unset", [key]);
      const gone = await r.qless("config.get", [key]);
      const renewed = (await r.qless("heartbeat", [r.jid("job"), "w", "{}"])).body.reply;
      const noValue = await r.qless("config.set", [key]);
      return {
        set: set.body,
        got: got.body,
        lock: Math.round(popped.expires - before),
        unset: unset.body,
        gone: gone.body,
        // qless answers the new expiry in whole seconds (a Lua number Redis truncates).
        renewedFor60s: Math.abs(renewed - before - 60) <= 1,
        noValue: [noValue.status, noValue.body.error.message],
      };
    });
    expect(seen).toEqual({
      set: { reply: null },
      got: { reply: "120" },
      lock: 120,
      unset: { reply: null },
      gone: { reply: null },
      renewedFor60s: true,
      noValue: [400, 'config.set(): Arg "value" missing'],
    });
  });

  it("config.get without a key answers qless's defaults with the gateway's settings over them, for stores that are not qless", async () => {
    const { qless, queue } = run("sql");
    await qless("config.set", [`${queue}-max-concurrency`, 3]);
    const all = (await qless("config.get", [])).body.reply;
    expect(all).toMatchObject({
      application: "qless",
      heartbeat: 60,
      "grace-period": 10,
      "jobs-history": 604800,
      [`${queue}-max-concurrency`]: "3",
    });
    expect((await qless("config.get", ["heartbeat"])).body.reply).toBe(60);
  });

  it("cancel of a failed job removes it, as qless's cancel deletes it; an unknown jid is ignored", async () => {
    const seen = await sameOnBoth(async (r) => {
      await put(r, "job", "K", {});
      await r.qless("pop", [r.queue, "w", 1]);
      await r.qless("fail", [r.jid("job"), "w", "group", "message", "{}"]);
      const canceled = await r.qless("cancel", [r.jid("job"), r.jid("unknown")]);
      const after = await r.qless("get", [r.jid("job")]);
      return { canceled: canceled.body, after: after.body };
    });
    expect(seen).toEqual({ canceled: { reply: ["<job>", "<unknown>"] }, after: { reply: null } });
  });

  it("priority answers the new priority and the job moves ahead; a missing job is qless's error", async () => {
    const seen = await sameOnBoth(async (r) => {
      await put(r, "first", "First", {});
      await put(r, "second", "Second", {});
      const priority = await r.qless("priority", [r.jid("second"), 10]);
      const popped = await r.qless("pop", [r.queue, "w", 1]);
      const missing = await r.qless("priority", [r.jid("missing"), 1]);
      return { priority: priority.body, popped: popped.body.reply[0].klass, missing };
    });
    expect(seen).toMatchObject({ priority: { reply: 10 }, popped: "Second", missing: { status: 400 } });
  });

  it("tag add and remove answer the job's tags; tag get finds the job by tag; a missing job is qless's error", async () => {
    const seen = await sameOnBoth(async (r) => {
      const tag = r.jid("tag"); // a tag no other test uses
      await put(r, "job", "K", {}, "tags", JSON.stringify(["a"]));
      const added = await r.qless("tag", ["add", r.jid("job"), tag, "b"]);
      const removed = await r.qless("tag", ["remove", r.jid("job"), "a"]);
      const found = await r.qless("tag", ["get", tag]);
      const missing = await r.qless("tag", ["add", r.jid("missing"), "x"]);
      return { added: added.body, removed: removed.body, found: found.body, missing };
    });
    expect(seen).toMatchObject({
      added: { reply: ["a", "<tag>", "b"] },
      removed: { reply: ["<tag>", "b"] },
      found: { reply: { total: 1, jobs: ["<job>"] } },
      missing: { status: 400, body: { error: { message: "Tag(): Job <missing> does not exist" } } },
    });
  });

  it("tag top lists the tags of two jobs or more, most used first, and tags used alike in Redis's reverse order of their bytes", async () => {
    const seen = await sameOnBoth(async (r) => {
      // Tags no other test uses; tag top is global to the store, so only these are looked at.
      const [a, b, c] = [r.jid("ta"), r.jid("tb"), r.jid("tc")];
      const ours = (reply: { reply: string[] }) => reply.reply.filter((tag) => [a, b, c].includes(tag));
      await put(r, "one", "K", {}, "tags", JSON.stringify([a, b, c]));
      await put(r, "two", "K", {}, "tags", JSON.stringify([a, b]));
      const tied = await r.qless("tag", ["top", 0, 10_000]);
      await put(r, "three", "K", {}, "tags", JSON.stringify([a]));
      const ranked = await r.qless("tag", ["top", 0, 10_000]);
      return { tied: ours(tied.body), ranked: ours(ranked.body) };
    });
    expect(seen).toEqual({ tied: ["<tb>", "<ta>"], ranked: ["<ta>", "<tb>"] });
  });

  it("tag top counts as qless's counter does: a tag added to a job holding it counts again, one removed from a job without it counts down", async () => {
    const seen = await sameOnBoth(async (r) => {
      const [a, b] = [r.jid("da"), r.jid("db")];
      const top = async () => ((await r.qless("tag", ["top", 0, 10_000])).body.reply as string[]).filter((tag) => [a, b].includes(tag));
      await put(r, "one", "K", {}, "tags", JSON.stringify([a]));
      await put(r, "two", "K", {}, "tags", JSON.stringify([b]));
      const once = await top();
      const added = (await r.qless("tag", ["add", r.jid("one"), a])).body.reply;
      const again = await top();
      const removed = (await r.qless("tag", ["remove", r.jid("two"), a])).body.reply;
      const down = await top();
      await r.qless("tag", ["add", r.jid("two"), b, b]);
      const twice = await top();
      return { once, added, again, removed, down, twice };
    });
    expect(seen).toEqual({ once: [], added: ["<da>"], again: ["<da>"], removed: ["<db>"], down: [], twice: ["<db>"] });
  });

  it("jobs lists running, scheduled, depends and recurring jids as qless does, and refuses an unknown type the same way", async () => {
    const seen = await sameOnBoth(async (r) => {
      await put(r, "running", "K", {});
      await r.qless("pop", [r.queue, "w", 1]);
      await r.qless("put", ["client", r.queue, r.jid("later"), "K", "{}", 60]);
      const lists = [];
      for (const type of ["running", "stalled", "scheduled", "depends", "recurring"])
        lists.push((await r.qless("jobs", [type, r.queue])).body);
      const unknown = await r.qless("jobs", ["waiting", r.queue]);
      return { lists, unknown };
    });
    expect(seen).toMatchObject({
      lists: [{ reply: ["<running>"] }, { reply: [] }, { reply: ["<later>"] }, { reply: [] }, { reply: [] }],
      unknown: { status: 400, body: { error: { message: 'Jobs(): Unknown type "waiting"' } } },
    });
  });

  it("jobs complete lists completed jids newest first", async () => {
    for (const store of STORES) {
      const r = run(store);
      for (const name of ["older", "newer"]) {
        await put(r, name, "K", {});
        await r.qless("pop", [r.queue, "w", 1]);
        await r.qless("complete", [r.jid(name), "w", r.queue, "{}"]);
        // The next completion gets a later time, the order both stores sort by.
        const completed = Date.now();
        await until(() => Date.now() > completed, "the clock to move on");
      }
      // qless's list is global: other tests' jobs may sit between ours.
      const listed: string[] = (await r.qless("jobs", ["complete", 0, 10_000])).body.reply;
      expect(listed.indexOf(r.jid("newer")), store).toBeGreaterThanOrEqual(0);
      expect(listed.indexOf(r.jid("newer")), store).toBeLessThan(listed.indexOf(r.jid("older")));
    }
  });

  it("retry gives the job back with one retry spent, answering what is left, and fails it for good when none is", async () => {
    const seen = await sameOnBoth(async (r) => {
      await put(r, "job", "K", {}, "retries", 1);
      await r.qless("pop", [r.queue, "w", 1]);
      const first = await r.qless("retry", [r.jid("job"), r.queue, "w"]);
      const waiting = (await r.qless("get", [r.jid("job")])).body.reply.state;
      await r.qless("pop", [r.queue, "w", 1]);
      const last = await r.qless("retry", [r.jid("job"), r.queue, "w"]);
      const failed = (await r.qless("get", [r.jid("job")])).body.reply;
      return { first: first.body, waiting, last: last.body, failed: [failed.state, failed.failure.group, failed.failure.message] };
    });
    expect(seen).toEqual({
      first: { reply: 0 },
      waiting: "waiting",
      last: { reply: -1 },
      failed: ["failed", "failed-retries-<queue>", 'Job exhausted retries in queue "<queue>"'],
    });
  });

  it("a failure names its worker and time until the job completes, through a put again; history names the run's worker", async () => {
    const started = Math.floor(Date.now() / 1000);
    /**
     * A job as qless shows who ran and failed it: the failure, the last pop's worker and the last
     * history entry (qless keeps the history of every put, a core store the last run's: only the
     * last run is compared). Times are checked for being the commands', then left out.
     */
    const runsOf = async (r: ReturnType<typeof run>, name: string) => {
      type Entry = Record<string, unknown>;
      const job = (await r.qless("get", [r.jid(name)])).body.reply as {
        failure: Entry;
        history: Entry[];
        remaining: number;
        state: string;
      };
      const timeless = ({ when, ...rest }: Entry) => {
        if (when !== undefined) {
          expect(when).toBeGreaterThanOrEqual(started);
          expect(when).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
        }
        return rest;
      };
      const history = job.history.map(timeless);
      const popped = history.filter((entry) => entry.what === "popped").at(-1);
      return { state: job.state, remaining: job.remaining, failure: timeless(job.failure), popper: popped?.worker, last: history.at(-1) };
    };
    const seen = await sameOnBoth(async (r) => {
      await put(r, "job", "K", {}, "retries", 2);
      await r.qless("pop", [r.queue, "w1", 1]);
      await r.qless("fail", [r.jid("job"), "w1", "group", "message", "{}"]);
      const failed = await runsOf(r, "job");
      await put(r, "job", "K", {});
      await r.qless("pop", [r.queue, "w2", 1]);
      const again = await runsOf(r, "job");
      await r.qless("complete", [r.jid("job"), "w2", r.queue, "{}"]);
      const completed = await runsOf(r, "job");
      await put(r, "last", "K", {}, "retries", 0);
      await r.qless("pop", [r.queue, "w3", 1]);
      await r.qless("retry", [r.jid("last"), r.queue, "w3", 0, "retry-group", "retry message"]);
      return { failed, again, completed, ranOut: await runsOf(r, "last") };
    });
    expect(seen).toEqual({
      failed: {
        state: "failed",
        remaining: 2,
        failure: { group: "group", message: "message", worker: "w1" },
        popper: "w1",
        last: { what: "failed", group: "group", worker: "w1" },
      },
      again: {
        state: "running",
        remaining: 2,
        failure: { group: "group", message: "message", worker: "w1" },
        popper: "w2",
        last: { what: "popped", worker: "w2" },
      },
      completed: { state: "complete", remaining: 2, failure: {}, popper: "w2", last: { what: "done" } },
      ranOut: {
        state: "failed",
        remaining: -1,
        failure: { group: "retry-group", message: "retry message", worker: "w3" },
        popper: "w3",
        last: { what: "failed", group: "retry-group" },
      },
    });
  });

  it("history lists every put, pop, failure and completion the doors made, trimmed to max-job-history as qless trims it", async () => {
    const started = Math.floor(Date.now() / 1000);
    const historyOf = async (r: ReturnType<typeof run>, name: string) => {
      const { history } = (await r.qless("get", [r.jid(name)])).body.reply as { history: Array<Record<string, unknown>> };
      return history.map(({ when, ...rest }) => {
        expect(when).toBeGreaterThanOrEqual(started);
        return rest;
      });
    };
    const seen = await sameOnBoth(async (r) => {
      await put(r, "job", "K", {}, "retries", 2);
      await r.qless("pop", [r.queue, "w1", 1]);
      await r.qless("fail", [r.jid("job"), "w1", "group", "message", "{}"]);
      await put(r, "job", "K", {});
      await r.qless("pop", [r.queue, "w2", 1]);
      await r.qless("retry", [r.jid("job"), r.queue, "w2", 0]);
      await r.qless("pop", [r.queue, "w3", 1]);
      await r.qless("complete", [r.jid("job"), "w3", r.queue, "{}"]);
      const ran = await historyOf(r, "job");
      await r.qless("config.set", ["max-job-history", 3]);
      for (let i = 0; i < 6; i++) await put(r, "reput", "K", {});
      const reputs = (await historyOf(r, "reput")).length;
      await r.qless("config.unset", ["max-job-history"]);
      return { ran, reputs };
    });
    expect(seen).toEqual({
      ran: [
        { what: "put", q: "<queue>" },
        { what: "popped", worker: "w1" },
        { what: "failed", worker: "w1", group: "group" },
        { what: "put", q: "<queue>" },
        { what: "popped", worker: "w2" },
        { what: "popped", worker: "w3" },
        { what: "done" },
      ],
      reputs: 3,
    });
  });

  it("stats counts waits, runs, lost locks and failures per queue and day as queue.lua does", async () => {
    // Noon of a day, in the client's seconds: every command of the scenario runs on that day.
    const noon = Math.floor(Date.now() / 86_400_000) * 86_400 - 86_400 * 3 + 43_200;
    const seen = await sameOnBoth(async (r) => {
      const at = (offset: number) => noon + offset;
      // Put at distinct times (qless pops jobs put at the same time in reverse jid order), and every
      // lock (60 s) released before it runs out.
      for (const [i, name] of ["a", "b", "c"].entries()) await r.qless("put", ["client", r.queue, r.jid(name), "K", "{}", 0], at(i / 10));
      await r.qless("pop", [r.queue, "w", 1], at(1));
      await r.qless("pop", [r.queue, "w", 1], at(2.5));
      await r.qless("pop", [r.queue, "w", 1], at(50));
      await r.qless("complete", [r.jid("a"), "w", r.queue, "{}"], at(51));
      await r.qless("fail", [r.jid("b"), "w", "group", "message", "{}"], at(52));
      await r.qless("complete", [r.jid("c"), "w", r.queue, "{}"], at(105.5));
      const beforeReput = (await r.qless("stats", [r.queue, noon], at(106))).body.reply;
      // A failed job put again leaves the failed count of its failure's day; a lock that ran out is a retry.
      await r.qless("put", ["client", r.queue, r.jid("b"), "K", "{}", 0], at(4000));
      await r.qless("config.set", [`${r.queue}-heartbeat`, -10], at(4000));
      await r.qless("pop", [r.queue, "w", 1], at(4001));
      await r.qless("pop", [r.queue, "w", 1], at(4002));
      await r.qless("config.unset", [`${r.queue}-heartbeat`], at(4002));
      const after = (await r.qless("stats", [r.queue, noon + 3600], at(4003))).body.reply;
      const otherDay = (await r.qless("stats", [r.queue, noon + 86_400], at(4003))).body.reply;
      const badDate = (await r.qless("stats", [r.queue, "tomorrow"], at(4003))).body.error.message;
      return { beforeReput, after, otherDay: [otherDay.wait.count, otherDay.failed], badDate };
    });
    const histogram = (slots: Record<number, number>) => Array.from({ length: 148 }, (_, i) => slots[i] ?? 0);
    expect(seen).toMatchObject({
      beforeReput: {
        retries: 0,
        failed: 1,
        failures: 1,
        // Slots: seconds 0-59, then minutes 1-59 (60-118), hours 1-23 (119-141), days 1-6.
        wait: { count: 3, histogram: histogram({ 1: 1, 2: 1, 49: 1 }) },
        run: { count: 2, histogram: histogram({ 50: 1, 55: 1 }) },
      },
      after: { retries: 1, failed: 0, failures: 1, wait: { count: 4 } },
      otherDay: [0, 0],
      badDate: 'Stats(): Arg "date" missing or not a number: tomorrow',
    });
    const { wait, run } = (seen as { beforeReput: Record<string, { mean: number; std: number }> }).beforeReput;
    expect(wait?.mean).toBeCloseTo((1 + 2.4 + 49.8) / 3, 6);
    expect(run?.mean).toBeCloseTo((50 + 55.5) / 2, 6);
    expect(run?.std).toBeCloseTo(Math.sqrt(5.5 ** 2 / 2), 6);
  });

  it("log adds an entry with its data to the job's history; a job keeps the data text its put sent", async () => {
    const seen = await sameOnBoth(async (r) => {
      await r.qless("put", ["client", r.queue, r.jid("job"), "K", '{"foo": "bar",  "n": [1, 2]}', 0]);
      const logged = (await r.qless("log", [r.jid("job"), "note", '{"by": "ops"}'])).body.reply;
      const job = (await r.qless("get", [r.jid("job")])).body.reply;
      // qless's jids are global: a put into another queue moves the job, keeping its history.
      await r.qless("put", ["client", `${r.queue}-other`, r.jid("job"), "K", '{"foo": "baz"}', 0]);
      // The door finds a job by the queue in the body: the one the job was moved to.
      const moved = (await send(gateway, "POST", "/qless/get", { queue: `${r.queue}-other`, args: [r.jid("job")] })).json.reply;
      const missing = (await r.qless("log", [r.jid("none"), "note"])).body.error.message;
      const notJson = (await r.qless("log", [r.jid("job"), "note", "{oops"])).status;
      const strip = (history: Array<Record<string, unknown>>) => history.map(({ when, ...rest }) => rest);
      return {
        logged,
        data: job.data,
        history: strip(job.history),
        moved: [moved.data, moved.queue, strip(moved.history)],
        missing,
        notJson,
      };
    });
    expect(seen).toEqual({
      logged: null,
      data: '{"foo": "bar",  "n": [1, 2]}',
      history: [
        { what: "put", q: "<queue>" },
        { what: "note", by: "ops" },
      ],
      moved: [
        '{"foo": "baz"}',
        "<queue>-other",
        [
          { what: "put", q: "<queue>" },
          { what: "note", by: "ops" },
          { what: "put", q: "<queue>-other" },
        ],
      ],
      missing: "Log(): Job <none> does not exist",
      notJson: 400,
    });
  });

  it("complete, fail, retry and heartbeat of a job not in the worker's hands answer qless's own words, in job.lua's order", async () => {
    const seen = await sameOnBoth(async (r) => {
      await put(r, "job", "K", {});
      await put(r, "other", "K", {});
      const error = async (command: string, args: Array<string | number>) => {
        const res = await r.qless(command, args);
        return [res.status, res.body.error?.message];
      };
      const waiting = [
        await error("complete", [r.jid("job"), "w", r.queue, "{}"]),
        await error("fail", [r.jid("job"), "w", "group", "message", "{}"]),
        await error("retry", [r.jid("job"), r.queue, "w"]),
        await error("heartbeat", [r.jid("job"), "w", "{}"]),
      ];
      await r.qless("pop", [r.queue, "w", 1]);
      const otherWorker = [
        await error("complete", [r.jid("job"), "intruder", r.queue, "{}"]),
        await error("fail", [r.jid("job"), "intruder", "group", "message", "{}"]),
        await error("retry", [r.jid("job"), r.queue, "intruder"]),
        await error("heartbeat", [r.jid("job"), "intruder", "{}"]),
      ];
      await r.qless("cancel", [r.jid("other")]);
      // qless deletes a canceled job: a store that keeps it must show it as gone.
      const canceled = [await error("heartbeat", [r.jid("other"), "w", "{}"]), (await r.qless("get", [r.jid("other")])).body];
      return { waiting, otherWorker, canceled };
    });
    expect(seen).toEqual({
      waiting: [
        [400, "Complete(): Job <job> is not currently running: waiting"],
        [400, "Fail(): Job <job>not currently running: waiting"],
        [400, "Retry(): Job <job> is not currently running: waiting"],
        [400, "Heartbeat(): Job <job> not currently running: waiting"],
      ],
      otherWorker: [
        [400, "Complete(): Job <job> has been handed out to another worker: w"],
        [400, "Fail(): Job <job> running with another worker: w"],
        [400, "Retry(): Job <job> has been given to another worker: w"],
        [400, "Heartbeat(): Job <job> given out to another worker: w"],
      ],
      canceled: [[400, "Heartbeat(): Job <other> does not exist"], { reply: null }],
    });
  });

  it("a job put with a delay stays scheduled once due, and is refused as scheduled, until a peek of its queue makes it waiting", async () => {
    const seen = await sameOnBoth(async (r) => {
      await r.qless("put", ["client", r.queue, r.jid("later"), "K", "{}", 0.2]);
      await new Promise((resolve) => setTimeout(resolve, 400));
      const state = async () => (await r.qless("get", [r.jid("later")])).body.reply.state;
      const due = await state();
      const refused = (await r.qless("complete", [r.jid("later"), "w", r.queue, "{}"])).body.error?.message;
      const peeked = (await r.qless("peek", [r.queue, 10])).body.reply.map((job: { jid: string }) => job.jid);
      return { due, refused, peeked, after: await state() };
    });
    expect(seen).toEqual({
      due: "scheduled",
      refused: "Complete(): Job <later> is not currently running: scheduled",
      peeked: ["<later>"],
      after: "waiting",
    });
  });

  it("pop and peek without a count are qless's argument errors, not one job", async () => {
    const seen = await sameOnBoth(async (r) => {
      await put(r, "job", "K", {});
      const pop = await r.qless("pop", [r.queue, "w"]);
      const peek = await r.qless("peek", [r.queue]);
      return [pop.status, peek.status, (await r.qless("peek", [r.queue, 1])).body.reply.length];
    });
    expect(seen).toEqual([400, 400, 1]);
  });

  it("queues without a queue lists every queue of the backend with its counts", async () => {
    await sameOnBoth(async (r) => {
      await put(r, "job", "K", {});
      const all = await r.qless("queues", []);
      return all.body.reply.find((entry: { name: string }) => entry.name === r.queue);
    });
  });

  it("queues keeps listing a queue whose only job a completion's next moved out, as qless lists every queue put to", async () => {
    const seen = await sameOnBoth(async (r) => {
      const next = `${r.queue}-next`;
      await put(r, "job", "K", {});
      await r.qless("pop", [r.queue, "worker", 1]);
      await r.qless("complete", [r.jid("job"), "worker", r.queue, "{}", "next", next]);
      const all = (await r.qless("queues", [])).body.reply as Array<{ name: string }>;
      return all.filter((entry) => entry.name === r.queue || entry.name === next);
    });
    expect(seen).toEqual([
      expect.objectContaining({ name: "<queue>", waiting: 0, running: 0 }),
      expect.objectContaining({ name: "<queue>-next", waiting: 1 }),
    ]);
  });

  it("complete with next answers and moves the job on as qless's script does", async () => {
    const seen = await sameOnBoth(async (r) => {
      const next = `${r.queue}-next`;
      const inNext = async (command: string, args: Array<string | number>) =>
        (await send(gateway, "POST", `/qless/${command}`, { queue: next, args })).json;
      await put(r, "job", "K", [], "priority", 2, "retries", 3);
      await r.qless("pop", [r.queue, "worker", 1]);
      const advanced = await r.qless("complete", [r.jid("job"), "worker", r.queue, "[]", "next", next]);
      const [job] = (await inNext("pop", [next, "worker", 1])).reply;
      const delayed = await inNext("complete", [r.jid("job"), "worker", next, "{}", "next", next, "delay", 10]);
      return {
        advanced: advanced.body,
        popped: [job.jid, job.queue, job.data, job.priority, job.remaining, job.state],
        delayed,
        peekOld: (await r.qless("peek", [r.queue, 10])).body,
      };
    });
    expect(seen).toEqual({
      advanced: { reply: "waiting" },
      popped: ["<job>", "<queue>-next", "[]", 2, 3, "running"],
      delayed: { reply: "scheduled" },
      peekOld: { reply: {} },
    });
  });

  it("depends on a job not waiting on others, or on none, is refused in qless's words on every store", async () => {
    const seen = await sameOnBoth(async (r) => {
      await put(r, "running", "K", {});
      await r.qless("pop", [r.queue, "worker", 1]);
      await put(r, "waiting", "K", {});
      await r.qless("put", ["client", r.queue, r.jid("scheduled"), "K", "{}", 60]);
      const refusals: Record<string, unknown> = {};
      for (const name of ["waiting", "scheduled", "running", "missing"]) {
        const res = await r.qless("depends", [r.jid(name), "on", r.jid("other")]);
        refusals[name] = [res.status, /Depends\(\): .*/.exec(res.body.error?.message ?? "")?.[0]];
      }
      return refusals;
    });
    expect(seen).toEqual({
      waiting: [400, "Depends(): Job <waiting> not in the depends state: waiting"],
      scheduled: [400, "Depends(): Job <scheduled> not in the depends state: scheduled"],
      running: [400, "Depends(): Job <running> not in the depends state: running"],
      missing: [400, "Depends(): Job <missing> not in the depends state: false"],
    });
  });
});
