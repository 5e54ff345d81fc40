/**
 * Side-by-side check against a real qless script (not part of `npm test`: qless-core is not in
 * this repository). Runs the same random command sequence, with the same `now` values, through
 * the given qless.lua on one database and Switchyard's script on another, and compares every
 * reply (or error) and a dump of every key after every step.
 *
 *   npx tsx packages/qless-redis/tools/side-by-side.ts <qless.lua> <redis://host:port/dbA> <dbB> [seed] [runs] [steps]
 *
 * Both databases are FLUSHED before every run: never point it at a database that holds data.
 * A qless.lua that runs on Redis 7 is needed: qless-core master plus the fix of its PR #90, or
 * the Ruby gem's lib/qless/lua/qless.lua.
 */
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { qlessScript } from "../src/script.js";

const [realPath, url, otherDb, seedArg = "1", runsArg = "20", stepsArg = "200"] = process.argv.slice(2);
if (!realPath || !url || otherDb === undefined) {
  console.error("usage: side-by-side.ts <qless.lua> <redis://host:port/dbA> <dbB> [seed] [runs] [steps]");
  process.exit(2);
}
const real = new Redis(url);
const ours = new Redis(url, { db: Number(otherDb) });
const realSha = (await real.script("LOAD", readFileSync(realPath, "utf8"))) as string;
const ourSha = (await ours.script("LOAD", qlessScript().source)) as string;

let seed = Number(seedArg);
const random = () => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
};
const pick = <T>(items: T[]): T => items[Math.floor(random() * items.length)] as T;
const JIDS = ["a", "b", "c", "d", "e", "f"];
const QUEUES = ["q1", "q2"];
const WORKERS = ["w1", "w2"];
const GROUPS = ["g1", "g2"];

/** One random qless command, arguments as a client would send them. */
function command(now: string): string[] {
  const [jid, queue, worker] = [pick(JIDS), pick(QUEUES), pick(WORKERS)];
  const roll = Math.floor(random() * 30);
  if (roll < 3) {
    const args = ["put", now, worker, queue, jid, "K", JSON.stringify({ n: Math.floor(random() * 10) }), pick(["0", "0", "5", "2.5"])];
    if (random() < 0.5) args.push("priority", pick(["0", "1", "-1", "2.7", "10"]));
    if (random() < 0.4) args.push("tags", pick(['["x"]', '["x","y"]', "[]"]));
    if (random() < 0.3) args.push("retries", pick(["0", "1", "3"]));
    if (random() < 0.3) args.push("depends", JSON.stringify([pick(JIDS)]));
    return args;
  }
  if (roll < 6) return ["pop", now, queue, worker, pick(["1", "2", "3"])];
  if (roll < 8) return ["heartbeat", now, jid, worker];
  if (roll < 10) {
    const args = ["complete", now, jid, worker, queue, "{}"];
    if (random() < 0.3) {
      args.push("next", pick(QUEUES));
      if (random() < 0.4) args.push("delay", "3");
      if (random() < 0.3) args.push("depends", JSON.stringify([pick(JIDS)]));
    }
    return args;
  }
  const others: string[][] = [
    ["peek", now, queue, pick(["1", "3"])],
    ["fail", now, jid, worker, pick(GROUPS), "msg"],
    random() < 0.5 ? ["retry", now, jid, queue, worker] : ["retry", now, jid, queue, worker, "2", pick(GROUPS), "m"],
    ["cancel", now, jid],
    ["timeout", now, jid],
    ["priority", now, jid, pick(["3", "0", "1.5"])],
    random() < 0.5 ? ["depends", now, jid, "on", pick(JIDS)] : ["depends", now, jid, "off", pick([pick(JIDS), "all"])],
    ["tag", now, pick(["add", "remove"]), jid, pick(["x", "z"])],
    ["track", now, pick(["track", "untrack"]), jid],
    ["unfail", now, queue, pick(GROUPS), "2"],
    ["recur", now, queue, "r", "K", "{}", "interval", pick(["5", "7"]), "0", "retries", "2", "backlog", pick(["0", "2"])],
    [
      "config.set",
      now,
      pick(["grace-period", "heartbeat", "q1-heartbeat", "q1-max-concurrency", "jobs-history-count", "max-job-history"]),
      pick(["0", "2", "5", "3"]),
    ],
    [pick(["pause", "unpause"]), now, queue],
    ["queues", now],
    ["workers", now],
    ["stats", now, queue, now],
    ["jobs", now, pick(["running", "stalled", "scheduled", "depends", "recurring"]), queue],
    ["failed", now],
    ["log", now, jid, "hello"],
    ["get", now, jid],
  ];
  return pick(others);
}

/** JSON compared as structures (key order carries no meaning; dependency arrays are sets). */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === "object") {
    const entries = Object.keys(value)
      .sort()
      .map((key) => {
        const inner = (value as Record<string, unknown>)[key];
        const sorted = (key === "dependencies" || key === "dependents") && Array.isArray(inner) ? [...inner].sort() : inner;
        return [key, canonical(sorted)];
      });
    return Object.fromEntries(entries);
  }
  return value;
}
const normal = (value: unknown) => {
  if (typeof value !== "string") return JSON.stringify(value);
  try {
    return JSON.stringify(canonical(JSON.parse(value)));
  } catch {
    return value;
  }
};

async function run(redis: Redis, sha: string, args: string[]) {
  try {
    return { reply: normal(await redis.evalsha(sha, 0, ...args)) };
  } catch (error) {
    const message = (error as Error).message;
    return {
      error: message
        .replace(/ script: \w+.*$/, "")
        .replace(/user_script:\d+: /, "")
        .replace(/table: 0x[0-9a-f]+/, "table"),
    };
  }
}

async function dump(redis: Redis): Promise<string> {
  const out: Record<string, unknown> = {};
  for (const key of (await redis.keys("*")).sort()) {
    const type = await redis.type(key);
    if (type === "hash") {
      const hash = await redis.hgetall(key);
      out[key] = Object.fromEntries(
        Object.keys(hash)
          .sort()
          .map((field) => [field, normal(hash[field])]),
      );
    } else if (type === "zset") out[key] = await redis.zrange(key, 0, -1, "WITHSCORES");
    else if (type === "list") out[key] = (await redis.lrange(key, 0, -1)).map(normal);
    else if (type === "set") out[key] = (await redis.smembers(key)).sort();
    else out[key] = await redis.get(key);
  }
  return JSON.stringify(out);
}

let steps = 0;
let differing = 0;
for (let round = 0; round < Number(runsArg); round++) {
  await real.flushdb();
  await ours.flushdb();
  let now = 1700000000;
  for (let step = 0; step < Number(stepsArg); step++) {
    now += pick([0, 0.25, 1, 3, 7, 15, 61]);
    const args = command(String(now));
    const [a, b] = [await run(real, realSha, args), await run(ours, ourSha, args)];
    const [dumpA, dumpB] = [await dump(real), await dump(ours)];
    steps++;
    if (JSON.stringify(a) !== JSON.stringify(b) || dumpA !== dumpB) {
      differing++;
      console.log(
        `round ${round} step ${step} ${JSON.stringify(args)}\n  qless:      ${JSON.stringify(a)}\n  switchyard: ${JSON.stringify(b)}`,
      );
      if (dumpA !== dumpB) console.log(`  keys differ:\n  ${dumpA}\n  ${dumpB}`);
      break;
    }
  }
}
console.log(`${steps} commands, ${differing} rounds with a difference`);
real.disconnect();
ours.disconnect();
process.exit(differing === 0 ? 0 : 1);
