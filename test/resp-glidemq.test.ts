import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { type RunningServer, startServer } from "@switchyard/gateway";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type StoreName, type StoreUnderTest, openStore } from "./matrix-backends.js";
import type { RecordedCommand } from "./resp-glidemq-record.js";
import { WireClient, type WireReply, addJobCommand } from "./resp-glidemq-wire.js";

/**
 * glide-mq's own client through the RESP door onto SQLite and PostgreSQL. The commands glide-mq
 * 0.15.4's Queue and Worker sent to Redis in each scenario (recorded by test/resp-glidemq-record.ts,
 * the library body cut to its header line) are replayed through the door onto a fresh store, in the
 * order Redis answered them, and every reply must equal Redis's once stream entry ids and
 * timestamps are normalised (as test/glidemq-golden.test.ts does). Then the jobs are probed in the
 * store's own table, and a job crosses between the RESP door and /v1 both ways.
 */
const FIXTURES = join(import.meta.dirname, "fixtures", "resp-glidemq");
/** The Redis database of the qless store under the door. */
const REDIS_DB = 4;

interface Fixture {
  scenario: string;
  queue: string;
  libraryLoaded: boolean;
  commands: RecordedCommand[];
}
const fixtures = readdirSync(FIXTURES)
  .filter((file) => file.endsWith(".json"))
  .map((file) => JSON.parse(readFileSync(join(FIXTURES, file), "utf8")) as Fixture);

/** The connection's greeting, sent but not compared: the server's name and id, and Redis 7.0's errors for CLIENT SETINFO. */
const CONNECTION_SETUP = new Set(["HELLO", "CLIENT", "INFO"]);
/**
 * The Worker's housekeeping in Redis: promoting delayed jobs, reclaiming stalled ones, scheduler
 * locks. A backend does that work itself, so the door answers each with "nothing to do"; Redis's
 * answer depends on when the timer fired (a promote finds 0 or 1 job due, a lock is free or not).
 */
const HOUSEKEEPING: Record<string, WireReply> = {
  glidemq_promote: 0,
  glidemq_promoteRateLimited: 0,
  glidemq_reclaimStalled: 0,
  glidemq_reclaimStalledListJobs: 0,
  glidemq_healListActive: 0,
  glidemq_sweepSuspended: 0,
  glidemq_nextDue: -1,
  glidemq_popLists: [],
  glidemq_tryLock: 1,
  glidemq_unlock: 1,
};
interface Difference {
  scenario: string;
  /** The command's place in the fixture, and the command itself (checked, so a re-recording cannot shift it silently). */
  index: number;
  command: string;
  /** The stores it applies to; every store when left out. */
  stores?: StoreName[];
  /** The door's reply, from Redis's. */
  door(recorded: WireReply): WireReply;
}
/** A map reply without one field. */
const withoutField = (field: string) => (reply: WireReply) =>
  reply !== null && typeof reply === "object" && !Array.isArray(reply) && "map" in reply
    ? { map: reply.map.filter(([key]) => key !== field) }
    : reply;
/**
 * Where the door answers otherwise, and why. glide-mq keeps a prioritized job in its `scheduled` set
 * (counted delayed) until a Worker's promote timer moves it to the priority list; a backend orders it
 * by priority at once, so the door counts it waiting from the start, in the stream's length. qless
 * clears a job's failure when the job completes, so its last failedReason is gone.
 */
const DIFFERENCES: Difference[] = [
  { scenario: "priority", index: 8, command: "XLEN glide:{rg-priority}:stream", door: () => 3 },
  { scenario: "priority", index: 11, command: "ZCARD glide:{rg-priority}:scheduled", door: () => 0 },
  { scenario: "job-counts", index: 40, command: "XLEN glide:{rg-job-counts}:stream", door: () => 2 },
  { scenario: "job-counts", index: 43, command: "ZCARD glide:{rg-job-counts}:scheduled", door: () => 1 },
  { scenario: "retry", index: 134, command: "HGETALL glide:{rg-retry}:job:1", stores: ["qless"], door: withoutField("failedReason") },
];

/** Stream entry ids and 13-digit millisecond times become tokens; nothing else changes. */
function normalise(reply: WireReply): unknown {
  if (typeof reply === "string") return reply.replace(/\b\d{13}-\d+\b/g, "<E>").replace(/\b\d{13}\b/g, "<T>");
  if (typeof reply === "number") return reply >= 1e12 ? "<T>" : reply;
  if (Array.isArray(reply)) return reply.map(normalise);
  if (reply !== null && typeof reply === "object") {
    if ("map" in reply) return { map: reply.map.map(([key, value]) => [normalise(key), normalise(value)]) };
    if ("err" in reply) return { err: reply.err.replace(/\b\d{13}-\d+\b/g, "<E>") };
  }
  return reply;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Where glide-mq's functions take the job id among their ARGV (after the keys). */
const JOB_ID_ARG: Record<string, number> = {
  glidemq_moveToActive: 3,
  glidemq_complete: 0,
  glidemq_completeAndFetchNext: 0,
  glidemq_fail: 0,
};

/**
 * Job ids: glide-mq counts 1, 2, 3 per queue, as a fresh SQL table's row ids do; qless makes a
 * uuid, Cloudq an ObjectId. Each id the door gives at add is mapped to the one Redis gave: the later
 * commands name the door's id, and its replies are read back with Redis's.
 */
class JobIds {
  readonly #actual = new Map<string, string>();
  readonly #recorded = new Map<string, string>();

  learn(recorded: WireReply, actual: WireReply): void {
    if (typeof recorded !== "string" || typeof actual !== "string" || recorded === "duplicate") return;
    this.#actual.set(recorded, actual);
    this.#recorded.set(actual, recorded);
  }

  actual(id: string): string {
    return this.#actual.get(id) ?? id;
  }

  /** The command as the door must get it: job keys and the job-id argument of the worker functions. */
  request(args: string[]): string[] {
    const out = args.map((arg) => arg.replace(/(:job:)(.+)$/, (_match, prefix: string, id: string) => prefix + this.actual(id)));
    const at = out[0]?.toUpperCase() === "FCALL" ? JOB_ID_ARG[out[1] as string] : undefined;
    if (at !== undefined) {
      const index = 3 + Number(out[2]) + at;
      out[index] = this.actual(out[index] as string);
    }
    return out;
  }

  /** The reply with Redis's ids where the door's are. */
  reply(reply: WireReply): WireReply {
    if (typeof reply === "string") return this.#recorded.get(reply) ?? reply;
    if (Array.isArray(reply)) return reply.map((item) => this.reply(item));
    if (reply !== null && typeof reply === "object" && "map" in reply)
      return { map: reply.map.map(([key, value]) => [this.reply(key), this.reply(value)] as [WireReply, WireReply]) };
    return reply;
  }
}

/** Replays a fixture through the door at `port`; returns what was compared, for the counts. */
async function replay(
  fixture: Fixture,
  port: number,
  store: StoreName,
  ids = new JobIds(),
): Promise<{ compared: number; housekeeping: number }> {
  const connections = new Map<number, WireClient>();
  const on = async (id: number) => {
    let client = connections.get(id);
    if (!client) {
      client = await WireClient.connect(port);
      connections.set(id, client);
    }
    return client;
  };
  let compared = 0;
  let housekeeping = 0;
  try {
    // The replay starts where Redis was: with glide-mq's library loaded when it already was.
    if (fixture.libraryLoaded) expect(await (await on(0)).send(["FUNCTION", "LOAD", "REPLACE", "#!lua name=glidemq"])).toBe("glidemq");
    for (const [index, { connection, args: recordedArgs, reply: recorded }] of fixture.commands.entries()) {
      const name = (recordedArgs[0] as string).toUpperCase();
      const args = ids.request(recordedArgs);
      const client = await on(connection);
      if (CONNECTION_SETUP.has(name)) {
        await client.send(args);
        continue;
      }
      const where = `${fixture.scenario} #${index} ${args.slice(0, 2).join(" ")}`;
      if (name === "XREADGROUP") {
        // An empty read is a Worker's idle loop, whose count depends on timing; a read that found a
        // job is read again (as the Worker's loop would) until the door hands it the same job.
        if (recorded === null) continue;
        let reply: WireReply = null;
        for (let tries = 0; reply === null && tries < 50; tries++) reply = ids.reply(await client.send(args));
        expect(normalise(reply), where).toEqual(normalise(recorded));
        compared++;
        continue;
      }
      const sent = await client.send(args);
      const fn = name === "FCALL" ? (args[1] as string) : "";
      if (fn === "glidemq_addJob") ids.learn(recorded, sent);
      const reply = ids.reply(sent);
      if (fn in HOUSEKEEPING || (name === "HGETALL" && args[1]?.endsWith(":schedulers"))) {
        expect(reply, where).toEqual(fn in HOUSEKEEPING ? HOUSEKEEPING[fn] : { map: [] });
        housekeeping++;
        continue;
      }
      const different = DIFFERENCES.find(
        (candidate) => candidate.scenario === fixture.scenario && candidate.index === index && (candidate.stores?.includes(store) ?? true),
      );
      if (different) expect(recordedArgs.join(" "), where).toBe(different.command);
      expect(normalise(reply), where).toEqual(normalise(different ? different.door(recorded) : recorded));
      compared++;
    }
  } finally {
    for (const client of connections.values()) client.close();
  }
  return { compared, housekeeping };
}

async function startDoor(store: StoreUnderTest): Promise<RunningServer> {
  return startServer({ config: { backends: { main: store.spec }, doors: { resp: { port: 0 } } }, port: 0, host: "127.0.0.1", env: {} });
}

describe.each(["sqlite", "postgres", "qless", "cloudq"] as const)(
  "glide-mq's recorded traffic through the RESP door onto %s",
  (storeName) => {
    it("all nine recorded scenarios are found", () => {
      expect(fixtures.map((fixture) => fixture.scenario).sort()).toEqual(
        ["add", "addBulk", "delay", "fail", "job-counts", "pause-resume", "priority", "retry", "worker-success"].sort(),
      );
    });

    for (const fixture of fixtures) {
      it(`${fixture.scenario}: every reply equals Redis's; each job is in the store, in its state`, async () => {
        // Cloudq keeps finished jobs only in its mark-deleted layout; glide-mq reads them back.
        const store = openStore(storeName, REDIS_DB, { completion: "mark-deleted" });
        store.track(fixture.queue);
        const server = await startDoor(store);
        const ids = new JobIds();
        try {
          const { compared } = await replay(fixture, server.respPort as number, storeName, ids);
          expect(compared).toBeGreaterThan(3);
          // Probed in the store itself: each job glide-mq added is a row, in the state Redis left it.
          const added = fixture.commands
            .filter((command) => command.args[1] === "glidemq_addJob")
            .map((command) => command.reply as string);
          expect(await store.countJobs(fixture.queue)).toBe(added.length);
          const finalStates = finalStatesOf(fixture);
          for (const [id, state] of Object.entries(finalStates))
            expect(store.nativeStates[state as keyof typeof store.nativeStates], `job ${id}`).toContain(
              await store.nativeState(fixture.queue, ids.actual(id)),
            );
        } finally {
          await server.close();
          await store.dispose();
        }
      });
    }
  },
);

/** The last state Redis reported for each job the scenario read back (HGETALL), in core's words. */
function finalStatesOf(fixture: Fixture): Record<string, string> {
  const states: Record<string, string> = {};
  for (const { args, reply } of fixture.commands) {
    if (
      args[0] !== "HGETALL" ||
      !args[1]?.includes(":job:") ||
      reply === null ||
      typeof reply !== "object" ||
      Array.isArray(reply) ||
      !("map" in reply)
    )
      continue;
    const state = reply.map.find(([field]) => field === "state")?.[1];
    if (typeof state === "string") states[args[1].slice(args[1].lastIndexOf(":") + 1)] = state;
  }
  return states;
}

describe("glide-mq over RESP and /v1 on the same SQLite queue", () => {
  const store = openStore("sqlite");
  let server: RunningServer;
  let client: WireClient;
  const base = () => `http://127.0.0.1:${server.port}`;
  const v1 = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base()}${path}`, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
    });
    const text = await res.text();
    return { status: res.status, json: text === "" ? undefined : JSON.parse(text) };
  };
  const keys = (queue: string) => ({
    id: `glide:{${queue}}:id`,
    stream: `glide:{${queue}}:stream`,
    scheduled: `glide:{${queue}}:scheduled`,
    events: `glide:{${queue}}:events`,
    job: (id: string) => `glide:{${queue}}:job:${id}`,
  });
  /** glidemq_addJob as glide-mq's Queue.add sends it; `extra` overrides ARGV entries by position. */
  const addJob = (queue: string, name: string, data: unknown, opts: Record<string, unknown> = {}, extra: Record<number, string> = {}) => {
    const command = addJobCommand(queue, name, data, opts);
    for (const [at, value] of Object.entries(extra)) command[7 + Number(at)] = value;
    return client.send(command);
  };

  beforeAll(async () => {
    server = await startDoor(store);
    client = await WireClient.connect(server.respPort as number);
    await client.send(["HELLO", "3"]);
  });
  // Each test starts with glide-mq's library loaded, as a client has it after its first connection.
  beforeEach(async () => {
    expect(
      await client.send([
        "FUNCTION",
        "LOAD",
        "REPLACE",
        "#!lua name=glidemq\nredis.register_function('glidemq_version', function() return '93' end)",
      ]),
    ).toBe("glidemq");
  });
  afterAll(async () => {
    client?.close();
    await server?.close();
    await store.dispose();
  });

  it("a job added through FCALL glidemq_addJob is read and completed through /v1", async () => {
    expect(await client.send(["FCALL", "glidemq_version", "0"])).toBe("93");
    const [library] = (await client.send(["FUNCTION", "LIST", "LIBRARYNAME", "glidemq"])) as Array<{ map: Array<[string, unknown]> }>;
    expect(library?.map.slice(0, 2)).toEqual([
      ["library_name", "glidemq"],
      ["engine", "LUA"],
    ]);
    const id = await addJob("cross-a", "resize", { image: "cat.png" }, { attempts: 2 });
    expect(typeof id).toBe("string");
    expect(await store.nativeState("cross-a", id as string)).toBe("pending");
    const got = await v1("GET", `/v1/queues/cross-a/jobs/${id}`);
    expect(got.json.job).toMatchObject({ id, name: "resize", data: { image: "cat.png" }, state: "waiting", maxAttempts: 2 });
    const reserved = await v1("POST", "/v1/queues/cross-a/reserve", { worker: "v1-worker" });
    expect(reserved.json.jobs.map((job: { id: string }) => job.id)).toEqual([id]);
    await v1("POST", `/v1/queues/cross-a/jobs/${id}/complete`, { worker: "v1-worker", result: { ok: true } });
    // And glide-mq's getJob (HGETALL) reads what /v1's worker left.
    const hash = (await client.send(["HGETALL", keys("cross-a").job(id as string)])) as { map: Array<[string, string]> };
    expect(Object.fromEntries(hash.map)).toMatchObject({
      id,
      state: "completed",
      returnvalue: '{"ok":true}',
      attemptsMade: "0",
      maxAttempts: "2",
    });
  });

  it("a job enqueued through /v1 is claimed, activated and completed by glide-mq's Worker calls", async () => {
    const k = keys("cross-b");
    const created = await v1("POST", "/v1/queues/cross-b/jobs", { name: "mail", data: { to: "a@b.c" } });
    const id = created.json.job.id as string;
    expect(await client.send(["XGROUP", "CREATE", k.stream, "workers", "0", "MKSTREAM"])).toEqual({ status: "OK" });
    const read = (await client.send(["XREADGROUP", "GROUP", "workers", "w-1", "COUNT", "1", "BLOCK", "100", "STREAMS", k.stream, ">"])) as {
      map: Array<[string, Array<[string, string[]]>]>;
    };
    const [[stream, [[entryId, fields]]]] = read.map as [[string, [[string, string[]]]]];
    expect(stream).toBe(k.stream);
    expect(fields).toEqual(["jobId", id, "name", "mail"]);
    expect(await store.nativeState("cross-b", id)).toBe("processing");
    // The Worker's heartbeat (HSET lastActive) extends the lease of the worker that holds the job.
    const leaseBefore = (await v1("GET", `/v1/queues/cross-b/jobs/${id}`)).json.job.lease;
    expect(leaseBefore.worker).toBe("w-1");
    await sleep(20);
    expect(await client.send(["HSET", k.job(id), "lastActive", String(Date.now())])).toBe(0);
    expect((await v1("GET", `/v1/queues/cross-b/jobs/${id}`)).json.job.lease.expiresAt).toBeGreaterThan(leaseBefore.expiresAt);
    expect(await client.send(["XAUTOCLAIM", k.stream, "workers", "w-2", "30000", "0-0"])).toEqual(["0-0", [], []]);
    const active = (await client.send([
      "FCALL",
      "glidemq_moveToActive",
      "2",
      k.job(id),
      k.stream,
      String(Date.now()),
      entryId,
      "workers",
      id,
    ])) as string[];
    expect(active.slice(0, 4)).toEqual(["id", id, "name", "mail"]);
    expect(active[active.indexOf("state") + 1]).toBe("active");
    const completed = await client.send([
      "FCALL",
      "glidemq_completeAndFetchNext",
      "5",
      k.stream,
      "glide:{cross-b}:completed",
      k.events,
      k.job(id),
      "glide:{cross-b}:metrics:completed",
      id,
      entryId,
      '"sent"',
      String(Date.now()),
      "workers",
      "w-1",
    ]);
    expect(completed).toEqual(["NEXT_NONE", id]);
    expect((await v1("GET", `/v1/queues/cross-b/jobs/${id}`)).json.job).toMatchObject({ state: "completed", result: "sent" });
    expect(await store.nativeState("cross-b", id)).toBe("complete");
  });

  it("pipelined adds (addBulk) are enqueued together; a bad or duplicate add among them answers alone", async () => {
    const ids = await client.sendAll(Array.from({ length: 30 }, (_, i) => addJobCommand("piped", "p", { i })));
    expect(new Set(ids).size).toBe(30);
    for (const [i, id] of ids.entries()) {
      const got = await v1("GET", `/v1/queues/piped/jobs/${id}`);
      expect(got.json.job).toMatchObject({ name: "p", data: { i } });
    }
    expect(await store.countJobs("piped")).toBe(30);
    const lifo = addJobCommand("piped-mixed", "b", {}, { lifo: true });
    lifo[7 + 17] = "1";
    const mixed = await client.sendAll([
      addJobCommand("piped-mixed", "a", {}),
      lifo,
      addJobCommand("piped-mixed", "c", {}, { jobId: "custom-1" }),
      addJobCommand("piped-mixed", "d", {}, { jobId: "custom-1" }),
    ]);
    expect(mixed).toEqual([expect.any(String), { err: expect.stringMatching(/lifo are not served/) }, "custom-1", "duplicate"]);
    expect(await store.countJobs("piped-mixed")).toBe(2);
  });

  it("a RESP2 client reads the stream as Redis answers RESP2: a list of [stream, entries]", async () => {
    const k = keys("resp2-q");
    const id = (await addJob("resp2-q", "plain", { n: 1 })) as string;
    const resp2 = await WireClient.connect(server.respPort as number);
    try {
      const read = await resp2.send(["XREADGROUP", "GROUP", "workers", "w-2", "COUNT", "5", "STREAMS", k.stream, ">"]);
      expect(read).toEqual([[k.stream, [[expect.stringMatching(/^\d+-\d+$/), ["jobId", id, "name", "plain"]]]]]);
      const hash = (await resp2.send(["HGETALL", k.job(id)])) as string[];
      expect(hash.slice(0, 4)).toEqual(["id", id, "name", "plain"]);
    } finally {
      resp2.close();
    }
  });

  it("a job whose Worker died comes back to another Worker after the dead one's lockDuration (stalled recovery)", async () => {
    const k = keys("stalled-q");
    const id = (await addJob("stalled-q", "slow", {}, { attempts: 3 })) as string;
    const read = async (consumer: string, block: string) =>
      (await client.send(["XREADGROUP", "GROUP", "workers", consumer, "COUNT", "1", "BLOCK", block, "STREAMS", k.stream, ">"])) as {
        map: Array<[string, Array<[string, string[]]>]>;
      } | null;
    // A Worker's stalled check names its consumer and lockDuration (here 300 ms): its claims last that long.
    const stalledCheck = ["workers", "w-dead", "300", "1", String(Date.now()), "glide:{stalled-q}:failed", "0", "300"];
    expect(await client.send(["FCALL", "glidemq_reclaimStalled", "2", k.stream, k.events, ...stalledCheck])).toBe(0);
    expect((await read("w-dead", "100"))?.map[0]?.[1][0]?.[1]).toEqual(["jobId", id, "name", "slow"]);
    expect((await v1("GET", `/v1/queues/stalled-q/jobs/${id}`)).json.job.lease.worker).toBe("w-dead");
    // w-dead never finishes: another Worker's blocked read gets the job once the lock ran out.
    const taken = await read("w-2", "3000");
    expect(taken?.map[0]?.[1][0]?.[1]).toEqual(["jobId", id, "name", "slow"]);
    expect((await v1("GET", `/v1/queues/stalled-q/jobs/${id}`)).json.job).toMatchObject({
      state: "active",
      attempts: 2,
      lease: { worker: "w-2" },
    });
    const complete = (consumer: string) =>
      client.send([
        "FCALL",
        "glidemq_completeAndFetchNext",
        "5",
        k.stream,
        "glide:{stalled-q}:completed",
        k.events,
        k.job(id),
        "m",
        id,
        "",
        '"done"',
        "0",
        "workers",
        consumer,
      ]);
    expect(await complete("w-dead")).toMatchObject({ err: expect.stringMatching(/LEASE_LOST/) });
    expect(await complete("w-2")).toEqual(["NEXT_NONE", id]);
    expect(await store.nativeState("stalled-q", id)).toBe("complete");
  });

  it("answers an error naming the call for unknown functions, wrong arity and unserved options, and stores nothing", async () => {
    const k = keys("bad-input");
    expect(await client.send(["FCALL", "glidemq_launchRockets", "0"])).toMatchObject({
      err: expect.stringMatching(/glidemq_launchRockets is not served/),
    });
    expect(await client.send(["FCALL", "not_glide", "0"])).toEqual({ err: "ERR Function not found" });
    expect(await client.send(["FCALL", "glidemq_addJob", "4", k.id, k.stream, k.scheduled, k.events, "short"])).toMatchObject({
      err: expect.stringMatching(/glidemq_addJob takes at least 4 keys and 17 args/),
    });
    expect(await client.send(["FCALL", "glidemq_addJob", "9", k.id])).toEqual({
      err: "ERR Number of keys can't be greater than number of args",
    });
    expect(await client.send(["FCALL", "glidemq_addJob", "x"])).toEqual({ err: "ERR Bad number of keys provided" });
    expect(await addJob("bad-input", "lifo", {}, { lifo: true }, { 17: "1" })).toMatchObject({
      err: expect.stringMatching(/lifo are not served.*nothing was stored/),
    });
    expect(await addJob("bad-input", "flow-child", {}, {}, { 6: "parent-1" })).toMatchObject({ err: expect.stringMatching(/parent jobs/) });
    expect(
      await client.send([
        "FCALL",
        "glidemq_addJob",
        "4",
        k.id,
        k.stream,
        k.scheduled,
        k.events,
        "n",
        "{not json",
        "{}",
        ...Array(16).fill("0"),
      ]),
    ).toMatchObject({
      err: expect.stringMatching(/data is not JSON/),
    });
    expect(
      await client.send(["FUNCTION", "LOAD", "#!lua name=mylib\nredis.register_function('f', function() return 1 end)"]),
    ).toMatchObject({
      err: expect.stringMatching(/library 'mylib' is not loaded/),
    });
    expect(await client.send(["FUNCTION", "LOAD", "#!lua name=glidemq\n"])).toEqual({ err: "ERR Library 'glidemq' already exists" });
    expect(await client.send(["XREADGROUP", "GROUP", "workers", "w", "STREAMS", k.stream, "0"])).toMatchObject({
      err: expect.stringMatching(/other than '>'/),
    });
    expect(await client.send(["HGETALL", "glide:{bad-input}:unknown-key"])).toMatchObject({
      err: expect.stringMatching(/'HGETALL' on 'glide:\{bad-input\}:unknown-key' is not served/),
    });
    expect(await client.send(["FLUSHALL"])).toMatchObject({ err: expect.stringMatching(/'FLUSHALL' is not served/) });
    expect(await store.countJobs("bad-input")).toBe(0);
    expect(await client.send(["PING"])).toEqual({ status: "PONG" });
  });
});

describe.skipIf(!process.env.GLIDEMQ_PATH)("glide-mq 0.15.4's stalled recovery through the RESP door onto SQLite", () => {
  it("a job held by a Worker that is gone is processed by another Worker after the first one's lockDuration", async () => {
    const { createRequire } = await import("node:module");
    // biome-ignore lint/suspicious/noExplicitAny: glide-mq is loaded at run time from a path, untyped
    const glide = createRequire(import.meta.url)(process.env.GLIDEMQ_PATH as string) as any;
    const store = openStore("sqlite");
    const server = await startDoor(store);
    const connection = { addresses: [{ host: "127.0.0.1", port: server.respPort as number }] };
    const queue = new glide.Queue("stalled", { connection });
    const options = { connection, concurrency: 1, blockTimeout: 100, lockDuration: 500, stalledInterval: 250 };
    try {
      const { id } = await queue.add("slow", { n: 1 }, { attempts: 3 });
      // The first Worker takes the job and never finishes it; its heartbeats stop when it is force-closed.
      let taken!: () => void;
      const holding = new Promise<void>((resolve) => {
        taken = resolve;
      });
      const first = new glide.Worker(
        "stalled",
        () => {
          taken();
          return new Promise(() => undefined);
        },
        options,
      );
      first.on("error", () => undefined);
      await holding;
      await first.close(true);
      const second = new glide.Worker("stalled", async () => "recovered", options);
      second.on("error", () => undefined);
      const deadline = Date.now() + 10_000;
      while ((await queue.getJobCounts()).completed < 1 && Date.now() < deadline) await sleep(50);
      await second.close();
      const job = await queue.getJob(id);
      expect(job.returnvalue).toBe("recovered");
      expect(store.nativeStates.completed).toContain(await store.nativeState("stalled", id));
    } finally {
      await queue.close();
      await server.close();
      await store.dispose();
    }
  }, 30_000);
});

/**
 * glide-mq's real Queue and Worker against the door on SQLite, PostgreSQL, qless and Cloudq, on demand: GLIDEMQ_PATH points at a
 * build of glide-mq 0.15.4 (see packages/glidemq-valkey/interop/glidemq-interop.ts).
 */
describe.skipIf(!process.env.GLIDEMQ_PATH).each(["sqlite", "postgres", "qless", "cloudq"] as const)(
  "glide-mq 0.15.4's own Queue and Worker through the RESP door onto %s",
  (storeName) => {
    it("adds jobs, a Worker processes them with a retry and a failure, the results are readable, pause and resume hold", async () => {
      const { createRequire } = await import("node:module");
      // biome-ignore lint/suspicious/noExplicitAny: glide-mq is loaded at run time from a path, untyped
      const glide = createRequire(import.meta.url)(process.env.GLIDEMQ_PATH as string) as any;
      const store = openStore(storeName, REDIS_DB, { completion: "mark-deleted" });
      store.track("real");
      const server = await startDoor(store);
      const connection = { addresses: [{ host: "127.0.0.1", port: server.respPort as number }] };
      const queue = new glide.Queue("real", { connection });
      try {
        const ids: string[] = [
          (await queue.add("double", { n: 1 })).id,
          (await queue.add("double", { n: 2 }, { attempts: 2, backoff: { type: "fixed", delay: 50 } })).id,
        ];
        ids.push(
          ...(
            await queue.addBulk([
              { name: "double", data: { n: 3 } },
              { name: "fail", data: { n: 4 } },
            ])
          ).map((job: { id: string }) => job.id),
        );
        const seen: string[] = [];
        const worker = new glide.Worker(
          "real",
          async (job: { name: string; data: { n: number }; attemptsMade: number }) => {
            seen.push(`${job.name}:${job.data.n}:${job.attemptsMade}`);
            if (job.name === "fail") throw new Error("always fails");
            if (job.data.n === 2 && job.attemptsMade === 0) throw new Error("first try fails");
            return { doubled: job.data.n * 2 };
          },
          { connection, concurrency: 1, blockTimeout: 100, promotionInterval: 50 },
        );
        worker.on("error", () => undefined);
        const deadline = Date.now() + 15_000;
        while (Date.now() < deadline) {
          const counts = await queue.getJobCounts();
          if (counts.completed === 3 && counts.failed === 1) break;
          await sleep(50);
        }
        await worker.close();
        expect(await queue.getJobCounts()).toEqual({ waiting: 0, active: 0, delayed: 0, completed: 3, failed: 1 });
        const second = await queue.getJob(ids[1]);
        expect(second.returnvalue).toEqual({ doubled: 4 });
        expect(second.attemptsMade).toBe(1);
        expect((await queue.getJob(ids[3])).failedReason).toBe("always fails");
        expect(seen).toContain("double:2:1");
        for (const id of ids.slice(0, 3)) expect(store.nativeStates.completed).toContain(await store.nativeState("real", id));
        expect(store.nativeStates.failed).toContain(await store.nativeState("real", ids[3] as string));
        await queue.pause();
        expect(await queue.isPaused()).toBe(true);
        await queue.resume();
        expect(await queue.isPaused()).toBe(false);
      } finally {
        await queue.close();
        await server.close();
        await store.dispose();
      }
    }, 30_000);
  },
);

describe("glide-mq over RESP with the gateway's tokens", () => {
  const store = openStore("sqlite");
  let server: RunningServer;
  const clients: WireClient[] = [];
  const as = async (token: string) => {
    const client = await WireClient.connect(server.respPort as number);
    clients.push(client);
    expect(await client.send(["HELLO", "3", "AUTH", "default", token])).toMatchObject({ map: expect.anything() });
    expect(await client.send(["FUNCTION", "LOAD", "REPLACE", "#!lua name=glidemq"])).toBe("glidemq");
    return client;
  };
  const add = (client: WireClient, queue: string) => client.send(addJobCommand(queue, "n", {}));
  beforeAll(async () => {
    server = await startServer({
      config: {
        backends: { main: store.spec },
        doors: { resp: { port: 0 } },
        auth: {
          tokens: [
            { name: "producer", token: "env:PRODUCER", access: "write", queues: ["mail*"] },
            { name: "viewer", token: "env:VIEWER", access: "read" },
            { name: "qless-only", token: "env:QLESS", access: "admin", doors: ["qless"] },
          ],
        },
      },
      port: 0,
      host: "127.0.0.1",
      env: { PRODUCER: "producer-token", VIEWER: "viewer-token", QLESS: "qless-token" },
    });
  });
  afterAll(async () => {
    for (const client of clients) client.close();
    await server?.close();
    await store.dispose();
  });

  it("a write token adds on its queues only, a read token reads only, a token without the glidemq door does nothing", async () => {
    const anonymous = await WireClient.connect(server.respPort as number);
    clients.push(anonymous);
    expect(await anonymous.send(["HGETALL", "glide:{mail}:job:1"])).toMatchObject({ err: expect.stringMatching(/^NOAUTH/) });
    // Before any client loaded glide-mq's library, the door answers as an empty Redis: the client loads it.
    expect(await anonymous.send(["AUTH", "viewer-token"])).toEqual({ status: "OK" });
    expect(await anonymous.send(["FCALL", "glidemq_version", "0"])).toEqual({ err: "ERR Function not found" });
    expect(await anonymous.send(["FCALL", "glidemq_addJob", "0"])).toEqual({ err: "ERR Function not found" });
    const producer = await as("producer-token");
    const id = await add(producer, "mail");
    expect(typeof id).toBe("string");
    expect(await add(producer, "reports")).toMatchObject({ err: expect.stringMatching(/^NOPERM.*queue "reports"/) });
    const viewer = await as("viewer-token");
    expect(await add(viewer, "mail")).toMatchObject({ err: expect.stringMatching(/^NOPERM.*needs write/) });
    expect(await viewer.send(["HGET", `glide:{mail}:job:${id}`, "name"])).toBe("n");
    const qlessOnly = await as("qless-token");
    expect(await qlessOnly.send(["XLEN", "glide:{mail}:stream"])).toMatchObject({ err: expect.stringMatching(/^NOPERM.*glidemq/) });
    expect(await store.countJobs("mail")).toBe(1);
    expect(await store.countJobs("reports")).toBe(0);
  });
});
