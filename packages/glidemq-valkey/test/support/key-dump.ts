import type { Redis } from "ioredis";

/** One key as the golden traces record it (see shared/golden/glide-mq/README.md). */
export interface DumpedKey {
  type: string;
  value: unknown;
}
export type Dump = Record<string, DumpedKey>;

/**
 * Normalisation of the golden traces, applied to our own dump: server-made stream entry ids become
 * <E1>, <E2>… in order of first appearance (per stream key, numbered across the scenario), consumer
 * ids become <W1>… in worker creation order, and the worker registry's pid/addr become <PID>/<HOST>.
 * Nothing else is touched: timestamps come from the same fake clock.
 */
export class Normaliser {
  private readonly entryTokens = new Map<string, string>();
  private nextEntry = 1;
  private readonly workers = new Map<string, string>();

  addWorker(consumerId: string): void {
    this.workers.set(consumerId, `<W${this.workers.size + 1}>`);
  }

  entry(key: string, id: string): string {
    if (id === "0-0") return id;
    const scoped = `${key}\u0000${id}`;
    let token = this.entryTokens.get(scoped);
    if (!token) {
      token = `<E${this.nextEntry++}>`;
      this.entryTokens.set(scoped, token);
    }
    return token;
  }

  keyName(key: string): string {
    let name = key;
    for (const [id, token] of this.workers) name = name.replace(id, token);
    return name;
  }
}

function pairs(flat: string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) record[flat[i] as string] = flat[i + 1] as string;
  return record;
}

/** SCANs the whole database and dumps every key in the golden format, normalised. */
export async function dumpDatabase(redis: Redis, norm: Normaliser, mainStream: string): Promise<Dump> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(cursor, "COUNT", 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== "0");
  keys.sort();
  const dump: Dump = {};
  for (const key of keys) {
    const type = await redis.type(key);
    let value: unknown;
    if (type === "hash") {
      const record = await redis.hgetall(key);
      value = Object.fromEntries(
        Object.keys(record)
          .sort()
          .map((f) => [f, record[f]]),
      );
    } else if (type === "zset") {
      const flat = await redis.zrange(key, 0, -1, "WITHSCORES");
      value = Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i], flat[2 * i + 1]]);
    } else if (type === "list") {
      value = await redis.lrange(key, 0, -1);
    } else if (type === "set") {
      value = (await redis.smembers(key)).sort();
    } else if (type === "string") {
      value = await redis.get(key);
      if (key.includes(":w:")) {
        const registry = JSON.parse(String(value)) as Record<string, unknown>;
        value = JSON.stringify({ ...registry, addr: "<HOST>", pid: "<PID>" });
      }
    } else if (type === "stream") {
      const entries = (await redis.xrange(key, "-", "+")).map(([id, fields]) => [norm.entry(key, id), pairs(fields)]);
      if (key === mainStream) {
        const groups = ((await redis.xinfo("GROUPS", key)) as unknown[][]).map((flat) => {
          const g = pairs(flat.map(String));
          const entriesRead = (flat as unknown[])[(flat as unknown[]).indexOf("entries-read") + 1];
          return {
            name: g.name,
            consumers: Number(g.consumers),
            pending: Number(g.pending),
            "last-delivered-id": norm.entry(key, String(g["last-delivered-id"])),
            "entries-read": entriesRead === null ? null : Number(entriesRead),
          };
        });
        value = { entries, groups };
      } else {
        value = entries;
      }
    }
    dump[norm.keyName(key)] = { type, value };
  }
  return dump;
}
