import type { Job, JobState, Page } from "@switchyard/core";
import { BackendUnavailableError, decodeCursor, encodeCursor } from "@switchyard/core";
import type { Redis } from "ioredis";
import { flatToRecord } from "./codec.js";
import type { QueueKeys } from "./keys.js";
import { toJob } from "./mapping.js";
import { type RedisClient, isCluster, runScript } from "./scripts.js";

/**
 * Where jobs of each state can be found. glide-mq keeps no per-state list of waiting or active jobs:
 * the state lives in the job hash, so a page walks the structures that hold members and keeps the
 * jobs whose hash says the wanted state.
 */
type Source = "stream" | "priority" | "lifo" | "scheduled" | "leases" | "completed" | "failed" | "blocked";
const ALL_SOURCES: Source[] = ["completed", "failed", "stream", "priority", "lifo", "scheduled", "leases", "blocked"];
const SOURCES_OF: Record<JobState, Source[]> = {
  waiting: ["priority", "lifo", "stream", "scheduled"],
  delayed: ["scheduled"],
  active: ["stream", "leases"],
  completed: ["completed"],
  failed: ["failed"],
  canceled: ["failed"],
  // Switchyard's own index: parents made by glide-mq's FlowProducer are in no index.
  blocked: ["blocked"],
};

interface Position {
  s: number;
  /** Stream: last entry id read; lists and sorted sets: index of the next member. */
  p: string | number;
}
const isPosition = (v: unknown): v is Position =>
  typeof v === "object" && v !== null && typeof (v as Position).s === "number" && ["string", "number"].includes(typeof (v as Position).p);

async function memberIds(
  client: RedisClient,
  keys: QueueKeys,
  source: Source,
  position: string | number,
  count: number,
): Promise<{ ids: string[]; next: string | number; done: boolean }> {
  if (source === "stream") {
    const start = position === "" ? "-" : `(${position}`;
    const entries = await client.xrange(keys.stream, start, "+", "COUNT", count);
    const ids = entries.map(([, fields]) => fields[fields.indexOf("jobId") + 1] ?? "");
    const last = entries.at(-1)?.[0];
    return { ids, next: last ?? position, done: entries.length < count };
  }
  const index = Number(position) || 0;
  const key = {
    priority: keys.priority,
    lifo: keys.lifo,
    scheduled: keys.scheduled,
    leases: keys.leases,
    completed: keys.completed,
    failed: keys.failed,
    blocked: keys.blocked,
  }[source];
  const ids =
    source === "priority" || source === "lifo"
      ? await client.lrange(key, index, index + count - 1)
      : await client.zrange(key, index, index + count - 1);
  return { ids, next: index + ids.length, done: ids.length < count };
}

/** The hash, `scheduled` score and dependencies of each id, in one script call (load-jobs.lua). */
export async function loadJobs(
  client: RedisClient,
  queue: string,
  keys: QueueKeys,
  ids: string[],
): Promise<Array<{ job: Job; hash: Record<string, string> } | null>> {
  if (ids.length === 0) return [];
  const replies = (await runScript(client, "load-jobs", [keys.scheduled], ids)) as Array<[string[], string | null, string[]]>;
  return ids.map((_, i) => {
    const [flat, score, deps] = replies[i] ?? [[], null, []];
    if (flat.length === 0) return null;
    const hash = flatToRecord(flat);
    return { job: toJob(queue, hash, score, deps), hash };
  });
}

/** One page of jobs in `state` (or every state for export), in source order, with an opaque cursor. */
export async function pageJobs(
  client: RedisClient,
  queue: string,
  keys: QueueKeys,
  state: JobState | null,
  limit: number,
  cursor: string | undefined,
): Promise<Page<Job>> {
  const sources = state ? SOURCES_OF[state] : ALL_SOURCES;
  let position = decodeCursor(cursor, isPosition) ?? { s: 0, p: "" };
  const items: Job[] = [];
  while (items.length < limit && position.s < sources.length) {
    const source = sources[position.s] as Source;
    const { ids, next, done } = await memberIds(client, keys, source, position.p, limit - items.length);
    for (const loaded of await loadJobs(client, queue, keys, ids)) {
      if (!loaded) continue;
      // A stream job under a Switchyard lease is in the stream and in the leases set: count it once.
      if (source === "leases" && loaded.hash.syEntryId) continue;
      if (state === null || loaded.job.state === state) items.push(loaded.job);
    }
    position = done ? { s: position.s + 1, p: "" } : { s: position.s, p: next };
  }
  return { items, cursor: position.s < sources.length ? encodeCursor(position) : null };
}

/**
 * Export position: a SCAN cursor of the queue's `job:*` keys, and the ids already returned from the
 * batch that SCAN cursor starts (a batch larger than the page is read again and its returned ids skipped).
 */
interface ScanPosition {
  c: string;
  k: string[];
}
const isScanPosition = (v: unknown): v is ScanPosition =>
  typeof v === "object" &&
  v !== null &&
  typeof (v as ScanPosition).c === "string" &&
  /^\d+$/.test((v as ScanPosition).c) &&
  Array.isArray((v as ScanPosition).k) &&
  (v as ScanPosition).k.every((id) => typeof id === "string");

/** SCAN fewer keys than this per round trip and a queue in a large database takes too many of them. */
const MIN_SCAN_COUNT = 200;

export const escapeGlob = (text: string) => text.replace(/[*?[\]\\]/g, "\\$&");

/** The node that holds a key: the client itself, or on a cluster the primary owning the key's slot. */
async function nodeOfKey(client: RedisClient, key: string): Promise<Redis> {
  if (!isCluster(client)) return client as Redis;
  const slot = Number(await client.cluster("KEYSLOT", key));
  const owner = client.slots[slot]?.[0];
  const node = client.nodes("master").find((n) => `${n.options.host}:${n.options.port}` === owner);
  if (!node) throw new BackendUnavailableError(`glidemq-valkey: no primary known for slot ${slot} of ${key}`);
  return node;
}

/** Every key that starts with `prefix` (one queue's hash tag: on a cluster, on the primary owning its slot). */
export async function keysStartingWith(client: RedisClient, prefix: string): Promise<string[]> {
  const node = await nodeOfKey(client, prefix);
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, found] = await node.scan(cursor, "MATCH", `${escapeGlob(prefix)}*`, "COUNT", 1000);
    cursor = next;
    keys.push(...found);
  } while (cursor !== "0");
  return keys;
}

/**
 * One export page, every state: SCAN of the queue's job hashes (`<prefix>:{q}:job:<id>`), so a job that
 * moves between glide-mq's structures while the export pages (promotion, a claim, a retry) is still
 * found; SCAN guarantees every key present from the first page to the last is returned at least once.
 * A job may appear on two pages (import skips ids it already has), never twice on one. The scan and
 * the reads run in one script call per page (export-page.lua), on the node that holds the queue.
 */
export async function exportJobs(
  client: RedisClient,
  queue: string,
  keys: QueueKeys,
  limit: number,
  cursor: string | undefined,
): Promise<Page<Job>> {
  const position: ScanPosition = decodeCursor(cursor, isScanPosition) ?? { c: "0", k: [] };
  const resumed = cursor !== undefined && cursor !== "";
  const [next, exported, ids, replies] = (await runScript(
    client,
    "export-page",
    [keys.scheduled],
    [position.c, `${escapeGlob(keys.job(""))}*`, Math.max(limit, MIN_SCAN_COUNT), limit, resumed ? "1" : "0", ...position.k],
  )) as [string, string[], string[], Array<[string[], string | null, string[]]>];
  const items: Job[] = [];
  ids.forEach((_, i) => {
    const [flat, score, deps] = replies[i] ?? [[], null, []];
    if (flat.length > 0) items.push(toJob(queue, flatToRecord(flat), score, deps));
  });
  const finished = next === "0" && exported.length === 0;
  return { items, cursor: finished ? null : encodeCursor({ c: next, k: exported }), mayRepeat: true };
}

/** Each key of every primary (a cluster's) that MATCH `pattern` selects: a walk of the whole keyspace. */
export async function walkKeys(client: RedisClient, pattern: string, onKey: (key: string) => void): Promise<void> {
  const nodes: Redis[] = isCluster(client) ? client.nodes("master") : [client as Redis];
  for (const node of nodes) {
    let cursor = "0";
    do {
      const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      for (const key of keys) onKey(key);
    } while (cursor !== "0");
  }
}

/**
 * Queue names that have any of glide-mq's queue-level keys (the backend's QueueDirectory shares one
 * walk among its readers). The MATCH takes the first letter of those keys only, so the job hashes
 * (`job:`), the bulk of a large keyspace, stay in Redis: at a million of them this process's CPU for
 * a walk 738 -> 290 ms.
 */
export async function queueNames(client: RedisClient, prefix: string): Promise<string[]> {
  const names = new Set<string>();
  const pattern = new RegExp(
    `^${prefix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:\\{([^}]*)\\}:(id|events|meta|stream|scheduled|completed|failed)$`,
  );
  await walkKeys(client, `${escapeGlob(prefix)}:{*}:[cefims]*`, (key) => {
    const match = pattern.exec(key);
    if (match?.[1]) names.add(match[1]);
  });
  return [...names].sort();
}
