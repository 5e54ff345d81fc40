import { createRequire } from "node:module";
import { type RunningServer, startServer } from "@switchyard/gateway";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreUnderTest, openStore } from "./matrix-backends.js";
import { WireClient, addJobCommand } from "./resp-glidemq-wire.js";
import { type PrivateServer, privateRedis } from "./support/private-servers.js";

/**
 * glide-mq over RESP onto a glidemq-valkey store: the store is glide-mq's own layout, so the door
 * passes glide-mq's commands through to it (its FCALLs run there) rather than translating them,
 * while a queue routed to SQLite on the same connection is still translated. The store is a
 * redis-server of this suite's own: function libraries are server-wide, and loading one into the
 * shared Redis would change it for every other suite.
 */
let redisServer: PrivateServer;
let redis: Redis;
let sqlite: StoreUnderTest;
let server: RunningServer;
let client: WireClient;
const v1 = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`http://127.0.0.1:${server.port}${path}`, {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
  });
  return (await res.json()) as { job: { id: string; state: string; result: unknown } };
};
/** A library of this test's own under glide-mq's name: the version check, and a call that reads a key. */
const LIBRARY = [
  "#!lua name=glidemq",
  "redis.register_function('glidemq_version', function() return '93' end)",
  "redis.register_function('glidemq_exists', function(keys) return redis.call('EXISTS', keys[1]) end)",
].join("\n");

beforeAll(async () => {
  redisServer = await privateRedis();
  redis = new Redis(redisServer.url);
  sqlite = openStore("sqlite");
  server = await startServer({
    config: {
      backends: { glide: { type: "glidemq-valkey", url: redisServer.url }, sql: sqlite.spec },
      routes: [
        { pattern: "glide-*", backend: "glide" },
        { pattern: "*", backend: "sql" },
      ],
      doors: { resp: { port: 0 } },
    },
    port: 0,
    host: "127.0.0.1",
    env: {},
  });
  client = await WireClient.connect(server.respPort as number);
  await client.send(["HELLO", "3"]);
}, 60_000);
afterAll(async () => {
  client?.close();
  await server?.close();
  redis?.disconnect();
  await redisServer?.dispose();
  await sqlite?.dispose();
});

describe("glide-mq over RESP onto a glidemq-valkey store", () => {
  it("the version check and FUNCTION LOAD reach the store: the library is loaded there", async () => {
    expect(await client.send(["FCALL", "glidemq_version", "0"])).toEqual({ err: "ERR Function not found" });
    expect(await client.send(["FUNCTION", "LOAD", "REPLACE", LIBRARY])).toBe("glidemq");
    expect(await client.send(["FCALL", "glidemq_version", "0"])).toBe("93");
    const libraries = (await redis.call("FUNCTION", "LIST")) as unknown[][];
    expect(libraries.map((library) => library[1])).toEqual(["glidemq"]);
    // An FCALL on a glidemq-valkey queue runs in the store's library, on the store's keys.
    await redis.set("glide:{glide-q}:marker", "1");
    expect(await client.send(["FCALL", "glidemq_exists", "1", "glide:{glide-q}:marker"])).toBe(1);
  });

  it("a job the adapter wrote is read, claimed and acknowledged through the door exactly as in the store", async () => {
    const created = await v1("POST", "/v1/queues/glide-q/jobs", { name: "mail", data: { to: "a@b.c" } });
    const id = created.job.id;
    const jobKey = `glide:{glide-q}:job:${id}`;
    const hash = (await client.send(["HGETALL", jobKey])) as { map: Array<[string, string]> };
    expect(Object.fromEntries(hash.map)).toEqual(await redis.hgetall(jobKey));
    expect(await client.send(["XGROUP", "CREATE", "glide:{glide-q}:stream", "workers", "0", "MKSTREAM"])).toMatchObject(
      expect.anything(), // OK, or BUSYGROUP when the adapter made the group first: the store's answer either way
    );
    const read = (await client.send([
      "XREADGROUP",
      "GROUP",
      "workers",
      "w-1",
      "COUNT",
      "1",
      "BLOCK",
      "100",
      "STREAMS",
      "glide:{glide-q}:stream",
      ">",
    ])) as { map: Array<[string, Array<[string, string[]]>]> };
    const entries = read.map[0]?.[1] ?? [];
    expect(entries.map(([, fields]) => fields[fields.indexOf("jobId") + 1])).toEqual([id]);
    // Probed in the store: the entry is pending for the door's consumer.
    const pending = (await redis.xpending("glide:{glide-q}:stream", "workers")) as [number, string, string, Array<[string, string]>];
    expect(pending[0]).toBe(1);
    expect(pending[3]).toEqual([["w-1", "1"]]);
    expect(await client.send(["XACK", "glide:{glide-q}:stream", "workers", entries[0]?.[0] as string])).toBe(1);
  });

  it("pipelined: passed-through commands go on at once, in order, between commands the door answers itself", async () => {
    const created = await v1("POST", "/v1/queues/glide-q/jobs", { name: "piped", data: {} });
    const jobKey = `glide:{glide-q}:job:${created.job.id}`;
    const k = (suffix: string) => `glide:{sql-piped}:${suffix}`;
    const replies: Array<Promise<unknown>> = [];
    for (let i = 0; i < 300; i++) {
      replies.push(client.send(["HSET", jobKey, "lastActive", String(i)]), client.send(["HGET", jobKey, "lastActive"]));
      // Every 50th, a command the door answers itself: what follows it waits for it, then goes on.
      if (i % 50 === 0) replies.push(client.send(addJobCommand("sql-piped", "n", {})));
    }
    const answers = await Promise.all(replies);
    let at = 0;
    for (let i = 0; i < 300; i++) {
      expect(answers[at++]).toBe(i === 0 ? 1 : 0); // a new field, then the same one
      expect(answers[at++]).toBe(String(i));
      if (i % 50 === 0) expect(answers[at++]).toEqual(expect.any(String));
    }
    expect(await sqlite.countJobs("sql-piped")).toBe(6);
  });

  it("commands the door does not serve never reach the store; a SQLite queue on the same connection is translated", async () => {
    expect(await client.send(["ZADD", "glide:{glide-q}:scheduled", "1", "x"])).toMatchObject({
      err: expect.stringMatching(/'ZADD' is not served/),
    });
    expect(await client.send(["FLUSHDB"])).toMatchObject({ err: expect.stringMatching(/'FLUSHDB' is not served/) });
    expect(await redis.exists("glide:{glide-q}:scheduled")).toBe(0);
    expect(await redis.dbsize()).toBeGreaterThan(0);
    const k = (suffix: string) => `glide:{sql-q}:${suffix}`;
    const added = await client.send(addJobCommand("sql-q", "n", {}));
    expect(typeof added).toBe("string");
    expect(await sqlite.nativeState("sql-q", added as string)).toBe("pending");
    expect(await redis.exists(k("id"), k("stream"))).toBe(0);
  });
});

/** glide-mq 0.15.4's own Queue and Worker, on demand (GLIDEMQ_PATH): the store holds what glide-mq on Redis would. */
describe.skipIf(!process.env.GLIDEMQ_PATH)("glide-mq 0.15.4's own Queue and Worker through the door onto a glidemq-valkey store", () => {
  it("jobs added are processed; /v1 reads the results", async () => {
    // biome-ignore lint/suspicious/noExplicitAny: glide-mq is loaded at run time from a path, untyped
    const glide = createRequire(import.meta.url)(process.env.GLIDEMQ_PATH as string) as any;
    // This suite's stand-in library goes: glide-mq finds none and loads its own, through the door.
    await redis.call("FUNCTION", "DELETE", "glidemq");
    const connection = { addresses: [{ host: "127.0.0.1", port: server.respPort as number }] };
    const queue = new glide.Queue("glide-real", { connection });
    const worker = new glide.Worker("glide-real", async (job: { data: { n: number } }) => ({ doubled: job.data.n * 2 }), {
      connection,
      concurrency: 1,
      blockTimeout: 100,
    });
    worker.on("error", () => undefined);
    try {
      const ids: string[] = [(await queue.add("double", { n: 1 })).id, (await queue.add("double", { n: 2 })).id];
      const deadline = Date.now() + 15_000;
      while ((await queue.getJobCounts()).completed < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await queue.getJobCounts()).toMatchObject({ completed: 2, waiting: 0, active: 0 });
      expect((await v1("GET", `/v1/queues/glide-real/jobs/${ids[1]}`)).job).toMatchObject({ state: "completed", result: { doubled: 4 } });
      expect(await redis.hget(`glide:{glide-real}:job:${ids[0]}`, "returnvalue")).toBe('{"doubled":2}');
    } finally {
      await worker.close();
      await queue.close();
    }
  }, 30_000);
});
