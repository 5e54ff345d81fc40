import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { Redis } from "ioredis";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Gateway, createGateway } from "../apps/gateway/src/index.js";
import { redisUrl } from "./matrix-backends.js";
import { serviceUrl } from "./support/services.js";

/**
 * Random bad input, beyond what /openapi.json describes, thrown at the four protocol doors: garbage
 * bodies, JSON of the wrong shape, numbers out of every range (1e999 parses to Infinity), JSON nested
 * 10 000 deep, bodies over the limit, NUL, lone surrogates and overlong text in names, ids and queue
 * names. Every request is made from a valid one by one seeded random mutation that breaks it, so
 * each must be refused with a 4xx, at once, and leave every store as it was, read there directly:
 * rows of the SQLite file, documents of the Mongo database, keys of Redis database 6 (this suite's).
 */
// CI's run; another hunt: SWITCHYARD_FUZZ_SEED=<n> SWITCHYARD_FUZZ_REQUESTS=20000 npx vitest run test/fuzz-doors.test.ts
const SEED = Number(process.env.SWITCHYARD_FUZZ_SEED ?? 14);
const REQUESTS = Number(process.env.SWITCHYARD_FUZZ_REQUESTS ?? 1500);
const dir = mkdtempSync(join(tmpdir(), "switchyard-fuzz-doors-"));
const sqliteFile = join(dir, "workerqueue.sqlite");
const mongoDatabase = `fuzz_doors_${Math.random().toString(36).slice(2, 10)}`;
const REDIS_DB = 6;

/** mulberry32: a small seeded PRNG, so a failure can be replayed with the same SEED. */
function prng(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  return { next, pick };
}

/**
 * Values spliced into the JSON text after stringifying: `1e999` (Infinity once parsed) and a value
 * nested deeper than the gateway's limit cannot be written by JSON.stringify itself.
 */
const RAW = { infinity: "__RAW_INFINITY__", deep: "__RAW_DEEP__" } as const;
const DEEP = `${"[".repeat(10_000)}${"]".repeat(10_000)}`;
const rawJson = (value: unknown) => JSON.stringify(value).replaceAll(`"${RAW.infinity}"`, "1e999").replaceAll(`"${RAW.deep}"`, DEEP);

const LONG = "x".repeat(300);
/** Text that no name, id, worker or queue may be: empty, NUL, a lone surrogate, over 255 characters, not a string. */
const BAD_TEXT: unknown[] = ["", "a\u0000b", "\u0000", "bad\ud800", "\udc00x", LONG, 42, true, null, {}, ["a"], RAW.infinity, RAW.deep];
/** A count, lease or wait that breaks its range or type. */
const BAD_COUNT: unknown[] = [-1, 0.5, 1e15, -1e308, 1e308, RAW.infinity, "5", true, null, {}, [1], RAW.deep];
const BAD_BOOL: unknown[] = ["true", 1, {}, [], RAW.deep];
/** Glide-mq's job ids must also stay clear of its key separators. */
const BAD_GLIDE_ID: unknown[] = [...BAD_TEXT, "a:b", "{tag}", "tab\there"];
/**
 * Queue names and ids in a path: NUL, too long, and for glide-mq its key separators. (A lone
 * surrogate has no percent-encoding; invalid UTF-8 such as %ED%A0%80 reaches a route as that literal
 * text, a valid name.)
 */
const BAD_QUEUE_SUFFIX = ["%00", "a%00b", LONG];
const BAD_GLIDE_QUEUE_SUFFIX = [...BAD_QUEUE_SUFFIX, "a%7Bb%7D", "a:b"];
const BAD_ID = ["%00", "a%00b", LONG];
const BAD_QLESS_COMMAND = ["nope", "put%00", "PUT", "put.extra"];

type Mutation = { at: Array<string | number>; values: unknown[] } | { remove: Array<string | number> };

interface Template {
  door: "cloudq" | "qless" | "glidemq" | "workerqueue";
  method: string;
  /** The path with `{queue}` (a queue routed to the door's store) and `{id}`. */
  path: string;
  body?: unknown;
  /** Ways to break the body: one field set to a bad value, or a required field removed. */
  breaks: Mutation[];
}

const TEMPLATES: Template[] = [
  {
    door: "cloudq",
    method: "POST",
    path: "/cloudq/{queue}",
    body: { job: { klass: "Mailer", args: [1, "two"] }, priority: 5 },
    breaks: [
      { at: ["job", "klass"], values: BAD_TEXT.filter((value) => typeof value !== "string" || value === "") },
      { remove: ["job", "args"] },
      { remove: ["job"] },
      { at: ["job"], values: ["Mailer", 7, null, [], RAW.deep] },
      { at: ["priority"], values: [-1, 101, 1e308, RAW.infinity, "high", {}, true] },
    ],
  },
  { door: "cloudq", method: "PUT", path: "/cloudq/{queue}", body: { job: { klass: "Mailer", args: [] } }, breaks: [{ remove: ["job"] }] },
  { door: "cloudq", method: "GET", path: "/cloudq/{queue}", breaks: [] },
  { door: "cloudq", method: "DELETE", path: "/cloudq/{queue}/{id}", breaks: [] },
  {
    door: "qless",
    method: "POST",
    path: "/qless/put",
    body: { args: ["worker-1", "{queue}", "jid-fuzz", "Klass", '{"a":1}', 0] },
    breaks: [
      { at: ["args"], values: ["put", 3, {}, null, [null], [{}], [[1]], [true], RAW.deep] },
      // qless-core takes any other jid or klass, empty or long; only what no store can keep as sent is refused.
      { at: ["args", 2], values: ["a\u0000b", "bad\ud800"] },
      { at: ["args", 3], values: ["a\u0000b", "bad\ud800"] },
      { at: ["args", 4], values: ["{not json", "[1,", ""] },
      // (A huge but finite delay is qless-core's to take: it schedules the job that far ahead.)
      { at: ["args", 5], values: ["soon", "", RAW.infinity] },
      { at: ["now"], values: [{}, [], true, null] },
      { at: ["queue"], values: ["", 5, {}] },
    ],
  },
  {
    door: "qless",
    method: "POST",
    path: "/qless/pop",
    body: { args: ["{queue}", "worker-1", 1] },
    breaks: [
      { at: ["args", 1], values: ["a\u0000b", "bad\ud800"] },
      { at: ["args", 2], values: ["many", RAW.infinity] },
    ],
  },
  {
    door: "qless",
    method: "POST",
    path: "/qless/heartbeat",
    body: { args: ["jid-missing", "worker-1", "{}"], queue: "{queue}" },
    breaks: [{ at: ["args", 2], values: ["{not json"] }],
  },
  {
    door: "glidemq",
    method: "POST",
    path: "/glidemq/queues/{queue}/jobs",
    body: { name: "resize", data: { w: 10 }, opts: { priority: 1, delay: 0, attempts: 3 } },
    breaks: [
      { at: ["name"], values: BAD_TEXT },
      { remove: ["name"] },
      { at: ["opts"], values: ["fast", 3, [], RAW.deep] },
      { at: ["opts", "priority"], values: [-1, 2049, RAW.infinity, 1e308, "1", true] },
      { at: ["opts", "delay"], values: [-1, 1e15, RAW.infinity, "soon"] },
      { at: ["opts", "attempts"], values: [0, -3, 1e9, RAW.infinity, "3"] },
      { at: ["opts", "jobId"], values: BAD_GLIDE_ID },
      { at: ["opts", "backoff"], values: ["exponential", -5, [], { delay: 5 }] },
      { at: ["opts", "unknownOption"], values: [1] },
      { at: ["data"], values: [RAW.deep] },
    ],
  },
  {
    door: "glidemq",
    method: "POST",
    path: "/glidemq/queues/{queue}/jobs/bulk",
    body: { jobs: [{ name: "a" }, { name: "b", opts: { jobId: "bulk-b" } }] },
    breaks: [
      { at: ["jobs"], values: [{}, "a", 5, null, RAW.deep] },
      { at: ["jobs", 1, "name"], values: BAD_TEXT },
      { at: ["jobs", 1, "opts", "jobId"], values: BAD_GLIDE_ID },
      { at: ["jobs", 0, "opts"], values: [{ priority: -1 }, { lifo: "yes" }] },
    ],
  },
  {
    door: "glidemq",
    method: "POST",
    path: "/glidemq/queues/{queue}/jobs/reserve",
    body: { worker: "worker-1", count: 2, lockDuration: 1000, wait: 0 },
    breaks: [
      { at: ["worker"], values: BAD_TEXT },
      { at: ["count"], values: BAD_COUNT },
      { at: ["lockDuration"], values: BAD_COUNT },
      { at: ["wait"], values: [-1, 30_001, 0.5, RAW.infinity, "0"] },
    ],
  },
  {
    door: "glidemq",
    method: "POST",
    path: "/glidemq/queues/{queue}/jobs/{id}/priority",
    body: { priority: 3 },
    breaks: [{ at: ["priority"], values: [-1, 2049, RAW.infinity, "3", null] }],
  },
  {
    door: "glidemq",
    method: "POST",
    path: "/glidemq/queues/{queue}/jobs/{id}/complete",
    body: { worker: "worker-1" },
    breaks: [{ at: ["worker"], values: BAD_TEXT }],
  },
  {
    door: "workerqueue",
    method: "POST",
    path: "/workerqueue/jobs",
    body: { name: "Report", data: { id: 1 }, taskable_type: "User", taskable_id: 7, queue: "{queue}" },
    breaks: [
      { at: ["name"], values: BAD_TEXT },
      { remove: ["name"] },
      { at: ["taskable_id"], values: [2 ** 31, -(2 ** 31) - 1, 1.5, RAW.infinity, "7", {}] },
      { at: ["taskable_type"], values: ["", LONG, 5] },
      { at: ["queue"], values: BAD_TEXT },
      { at: ["unexpected"], values: [1] },
      { at: ["data"], values: [RAW.deep] },
    ],
  },
  {
    door: "workerqueue",
    method: "POST",
    path: "/workerqueue/reserve",
    body: { worker: "worker-1", queue: "{queue}", count: 1, waitMs: 0, leaseMs: 1000 },
    breaks: [
      { at: ["worker"], values: BAD_TEXT },
      { at: ["count"], values: BAD_COUNT },
      { at: ["waitMs"], values: [-1, 300_001, 0.5, RAW.infinity] },
      { at: ["leaseMs"], values: BAD_COUNT },
    ],
  },
  {
    door: "workerqueue",
    method: "POST",
    path: "/workerqueue/jobs/{id}/error",
    body: { worker: "worker-1", queue: "{queue}", details: "boom", retry: false },
    breaks: [
      { at: ["details"], values: ["", "x".repeat(65_536), 5, null] },
      { at: ["retry"], values: BAD_BOOL },
    ],
  },
  {
    door: "workerqueue",
    method: "POST",
    path: "/workerqueue/jobs/{id}/progress",
    body: { worker: "worker-1", queue: "{queue}", progress: 50 },
    breaks: [{ at: ["worker"], values: BAD_TEXT }, { remove: ["progress"] }, { at: ["progress"], values: [RAW.deep] }],
  },
];

/** The queue each door's valid requests name; the routes send it to the door's own store. */
const QUEUE: Record<Template["door"], string> = { cloudq: "cq-fuzz", qless: "ql-fuzz", glidemq: "gl-fuzz", workerqueue: "wq-fuzz" };

interface Garbage {
  what: string;
  method: string;
  path: string;
  body?: string | Uint8Array;
}

/** Sets or removes the value at `at` in a copy of `body`. */
function mutate(body: unknown, at: Array<string | number>, value: unknown, remove: boolean): unknown {
  const copy = structuredClone(body) as Record<string | number, unknown>;
  let parent = copy;
  for (const key of at.slice(0, -1)) {
    if (typeof parent[key] !== "object" || parent[key] === null) parent[key] = {};
    parent = parent[key] as Record<string | number, unknown>;
  }
  if (remove) delete parent[at.at(-1)!];
  else parent[at.at(-1)!] = value;
  return copy;
}

/** Replaces `{queue}` everywhere in a body's strings with the door's queue. */
const withQueue = (body: unknown, queue: string): unknown => JSON.parse(JSON.stringify(body).replaceAll("{queue}", queue));

/** One bad request: a broken field, a broken body, or a broken queue name or id in the path. */
function garbage(random: ReturnType<typeof prng>): Garbage {
  const template = random.pick(TEMPLATES);
  const queue = QUEUE[template.door];
  const path = (q: string, id = "job-1") => template.path.replace("{queue}", q).replace("{id}", id);
  const valid = template.body === undefined ? undefined : withQueue(template.body, queue);
  // The qless door's path holds the command; Worker Queue's create and reserve name the queue in the body.
  const hasPathParts = template.door === "qless" || template.path.includes("{");
  const ways = ["field", "field", "field", "body", ...(hasPathParts ? ["path"] : [])] as const;
  const way = template.breaks.length === 0 || valid === undefined ? "path" : random.pick(ways);
  const label = `${template.method} ${template.path}`;

  if (way === "path") {
    const badId = template.path.includes("{id}") && (!template.path.includes("{queue}") || random.next() < 0.5);
    const suffixes = template.door === "glidemq" ? BAD_GLIDE_QUEUE_SUFFIX : BAD_QUEUE_SUFFIX;
    const target =
      template.door === "qless"
        ? `/qless/${random.pick(BAD_QLESS_COMMAND)}`
        : badId
          ? path(queue, random.pick(BAD_ID))
          : path(`${queue.slice(0, 3)}${random.pick(suffixes)}`);
    return {
      what: `${label} as ${target.length > 80 ? `${target.slice(0, 60)}... (${target.length} chars)` : target}`,
      method: template.method,
      path: target,
      ...(valid === undefined ? {} : { body: JSON.stringify(valid) }),
    };
  }
  if (way === "body") {
    const text = JSON.stringify(valid);
    const bodies: Array<[string, string | Uint8Array]> = [
      ["truncated JSON", text.slice(0, Math.max(1, Math.floor(random.next() * text.length)))],
      ["random bytes", Uint8Array.from({ length: 1 + Math.floor(random.next() * 64) }, () => Math.floor(random.next() * 256))],
      ["a JSON array", `[${text}]`],
      ["a JSON string", JSON.stringify(text)],
      ["a number", "1e999"],
      ["null", "null"],
      ["deep JSON", DEEP],
      ["a body over 1 MiB", JSON.stringify({ ...(valid as object), pad: "p".repeat(1_100_000) })],
    ];
    const [what, body] = random.pick(bodies);
    return { what: `${label} with ${what} as body`, method: template.method, path: path(queue), body };
  }
  const broken = random.pick(template.breaks);
  if ("remove" in broken) {
    return {
      what: `${label} without ${broken.remove.join(".")}`,
      method: template.method,
      path: path(queue),
      body: rawJson(mutate(valid, broken.remove, undefined, true)),
    };
  }
  const value = random.pick(broken.values);
  const shown = typeof value === "string" && value.length > 40 ? `${value.slice(0, 20)}... (${value.length} chars)` : JSON.stringify(value);
  return {
    what: `${label} with ${broken.at.join(".")} = ${shown}`,
    method: template.method,
    path: path(queue),
    body: rawJson(mutate(valid, broken.at, value, false)),
  };
}

let gateway: Gateway;
let redis: Redis;
let mongo: MongoClient;

/** What every store holds, counted there directly: rows of every SQLite table, Mongo documents, Redis keys. */
async function footprint(): Promise<{ sqlite: number; mongo: number; redis: number }> {
  const db = new Database(sqliteFile, { readonly: true, fileMustExist: true });
  let sqlite = 0;
  try {
    const tables = db.prepare("select name from sqlite_master where type = 'table' and name not like 'sqlite_%'").all() as Array<{
      name: string;
    }>;
    for (const { name } of tables) sqlite += (db.prepare(`select count(*) as n from "${name}"`).get() as { n: number }).n;
  } finally {
    db.close();
  }
  let documents = 0;
  for (const { name } of await mongo.db(mongoDatabase).listCollections().toArray()) {
    documents += await mongo.db(mongoDatabase).collection(name).countDocuments();
  }
  return { sqlite, mongo: documents, redis: await redis.dbsize() };
}

async function send(request: Garbage): Promise<{ status: number; text: string; ms: number }> {
  const started = Date.now();
  const init: RequestInit = { method: request.method, headers: { "content-type": "application/json" } };
  if (request.body !== undefined) init.body = request.body;
  const answer = (async () => {
    const res = await gateway.app.request(`http://gateway${request.path}`, init);
    return { status: res.status, text: await res.text() };
  })();
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${request.what}: no answer within 5 s`)), 5_000);
  });
  try {
    return { ...(await Promise.race([answer, hung])), ms: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

beforeAll(async () => {
  redis = new Redis(redisUrl(REDIS_DB));
  await redis.flushdb();
  mongo = new MongoClient(serviceUrl("mongo"));
  gateway = await createGateway({
    env: {},
    config: {
      backends: {
        sql: { type: "workerqueue-sql", url: `sqlite:${sqliteFile}` },
        mongo: { type: "cloudq-mongo", url: serviceUrl("mongo"), options: { database: mongoDatabase } },
        qless: { type: "qless-redis", url: redisUrl(REDIS_DB) },
        glide: { type: "glidemq-valkey", url: redisUrl(REDIS_DB) },
      },
      routes: [
        { pattern: "wq*", backend: "sql" },
        { pattern: "cq*", backend: "mongo" },
        { pattern: "ql*", backend: "qless" },
        { pattern: "gl*", backend: "glide" },
      ],
      doors: { workerqueue: { queue: QUEUE.workerqueue } },
    },
  });
});
afterAll(async () => {
  await gateway?.close();
  await mongo?.db(mongoDatabase).dropDatabase();
  await mongo?.close();
  await redis?.flushdb();
  redis?.disconnect();
  rmSync(dir, { recursive: true, force: true });
});

describe(`${REQUESTS} random bad requests to the Cloudq, qless, glide-mq and Worker Queue doors (seed ${SEED})`, () => {
  it(
    "are each refused with a 4xx at once and store nothing",
    async () => {
      const random = prng(SEED);
      const before = await footprint();
      const wrong: string[] = [];
      const doors = new Map<string, number>();
      for (let i = 0; i < REQUESTS; i++) {
        const request = garbage(random);
        const { status, text } = await send(request);
        const door = request.path.split("/")[1]!;
        doors.set(door, (doors.get(door) ?? 0) + 1);
        if (status < 400 || status > 499) wrong.push(`#${i} ${request.what}: ${status} ${text.slice(0, 200)}`);
        const after = await footprint();
        if (JSON.stringify(after) !== JSON.stringify(before)) {
          wrong.push(`#${i} ${request.what}: ${status}, and the stores changed from ${JSON.stringify(before)} to ${JSON.stringify(after)}`);
          Object.assign(before, after);
        }
      }
      expect(wrong).toEqual([]);
      // Every door got its share.
      for (const door of ["cloudq", "qless", "glidemq", "workerqueue"]) expect(doors.get(door) ?? 0).toBeGreaterThan(REQUESTS / 10);
    },
    REQUESTS * 80,
  );

  it("a valid request through each door is stored, so the footprint above can see a write", async () => {
    const valid: Garbage[] = [
      { what: "Cloudq publish", method: "POST", path: `/cloudq/${QUEUE.cloudq}`, body: JSON.stringify({ job: { klass: "K", args: [] } }) },
      {
        what: "qless put",
        method: "POST",
        path: "/qless/put",
        body: JSON.stringify({ args: ["w", QUEUE.qless, "jid-ok", "K", "{}", 0] }),
      },
      { what: "glide-mq add", method: "POST", path: `/glidemq/queues/${QUEUE.glidemq}/jobs`, body: JSON.stringify({ name: "ok" }) },
      { what: "Worker Queue create", method: "POST", path: "/workerqueue/jobs", body: JSON.stringify({ name: "ok" }) },
    ];
    for (const request of valid) {
      const before = await footprint();
      const { status, text } = await send(request);
      expect(status, `${request.what}: ${text}`).toBeLessThan(300);
      expect(await footprint(), request.what).not.toEqual(before);
    }
  });
});
