/**
 * The floor a glide-mq -> qless migration is measured against: a hand-written copy of one queue's
 * waiting jobs with bare commands and nothing else, as a one-off script would do it. SCAN of the
 * job hashes and a pipelined HGETALL per page from the source; per job the qless hash, its `put`
 * history entry and its place in the work set (one ZADD per page), pipelined into the target while
 * the next page is read. It checks nothing (no state, no existing jid, no read-back, no checksum),
 * so it is what the two Redis servers and ioredis cost for the copy alone on this machine.
 */
import { Redis } from "ioredis";

const PAGE = 1_000;

export async function rawCopyGlideToQless(sourceUrl: string, targetUrl: string, queue: string): Promise<number> {
  const source = new Redis(sourceUrl);
  const target = new Redis(targetUrl);
  const prefix = `glide:{${queue}}:job:`;
  let cursor = "0";
  let copied = 0;
  let writing: Promise<unknown> = Promise.resolve();
  try {
    do {
      const [next, keys] = await source.scan(cursor, "MATCH", `${prefix}*`, "COUNT", PAGE);
      cursor = next;
      const ids = keys.map((key) => key.slice(prefix.length)).filter((id) => !id.includes(":"));
      const read = source.pipeline();
      for (const id of ids) read.hgetall(prefix + id);
      const hashes = ((await read.exec()) ?? []).map(([, hash]) => hash as Record<string, string>);
      await writing;
      const write = target.pipeline();
      const work: Array<string | number> = [];
      hashes.forEach((hash, i) => {
        const jid = ids[i] as string;
        const seconds = Number(hash.timestamp) / 1000;
        const retries = String((JSON.parse(hash.opts ?? "{}") as { attempts?: number }).attempts ?? 0);
        // biome-ignore format: one field and its value per line would hide the hash's shape
        write.hset(`ql:j:${jid}`,
          "jid", jid, "klass", hash.name ?? "", "data", hash.data ?? "{}", "priority", hash.priority ?? "0", "tags", "{}",
          "state", "waiting", "worker", "", "expires", "0", "queue", queue, "retries", retries, "remaining", retries,
          "time", seconds.toFixed(20));
        write.rpush(`ql:j:${jid}-history`, JSON.stringify({ q: queue, what: "put", when: Math.floor(seconds) }));
        work.push(-seconds / 1e10, jid);
      });
      if (work.length > 0) write.zadd(`ql:q:${queue}-work`, ...work);
      copied += hashes.length;
      writing = write.exec();
    } while (cursor !== "0");
    await writing;
    await target.zadd("ql:queues", "NX", Date.now() / 1000, queue);
    return copied;
  } finally {
    source.disconnect();
    target.disconnect();
  }
}
