import type { Redis } from "ioredis";

/** One key as the golden traces record it. */
export type DumpedKey =
  | { type: "hash"; value: Record<string, string> }
  | { type: "zset"; value: [string, string][] }
  | { type: "list"; value: string[] }
  | { type: "set"; value: string[] }
  | { type: "string"; value: string };

/** Every key of the selected database, sorted by name, in the golden trace format. */
export async function dumpKeys(redis: Redis): Promise<Record<string, DumpedKey>> {
  const names = (await redis.keys("*")).sort();
  const dump: Record<string, DumpedKey> = {};
  for (const name of names) {
    const type = await redis.type(name);
    if (type === "hash") dump[name] = { type, value: await redis.hgetall(name) };
    else if (type === "list") dump[name] = { type, value: await redis.lrange(name, 0, -1) };
    else if (type === "set") dump[name] = { type, value: (await redis.smembers(name)).sort() };
    else if (type === "string") dump[name] = { type, value: (await redis.get(name)) ?? "" };
    else if (type === "zset") {
      const flat = await redis.zrange(name, 0, -1, "WITHSCORES");
      const pairs: [string, string][] = [];
      for (let i = 0; i < flat.length; i += 2) pairs.push([flat[i] as string, flat[i + 1] as string]);
      dump[name] = { type, value: pairs };
    } else throw new Error(`unexpected key type ${type} for ${name}`);
  }
  return dump;
}
