import {
  type Job,
  type JobCounts,
  type JobState,
  type Page,
  ValidationError,
  decodeCursor,
  emptyCounts,
  encodeCursor,
} from "@switchyard/core";
import { BSON, ObjectId } from "mongodb";
import { type CloudqDocument, type DocumentId, documentToJob } from "./document.js";
import { idOf, idSlot, idSpellings, jobFilter, jobsFilters } from "./ids.js";
import { stateFilter } from "./queries.js";
import type { Store } from "./store.js";

const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

export async function getJob(store: Store, queue: string, id: string): Promise<Job | null> {
  const document = await findDocument(store, queue, id);
  return document ? documentToJob(document, store.layout.stateField, store.now()) : null;
}

/** The document of job `id` in `queue`, as jobFilter finds it: a caller-chosen id wins over an `_id` of the same spelling. */
export async function findDocument(store: Store, queue: string, id: string): Promise<CloudqDocument | null> {
  if (!store.server.equalitiesOnly) return store.jobs.findOne(jobFilter(queue, id));
  // By equalities only (ServerTraits): the `_id` a caller-chosen id is kept under, then that document.
  const [slotted, ...byKey] = await Promise.all([
    store.jobs.distinct("_id", { "switchyard.idSlot": idSlot(queue, id) }),
    ...idSpellings(id).map((_id) => store.jobs.findOne({ _id, queue })),
  ]);
  const [_id] = slotted as DocumentId[];
  if (_id !== undefined) return store.jobs.findOne({ _id, queue });
  return byKey.find((document) => document !== null) ?? null;
}

/** The documents of these ids in a queue, by id: a caller-chosen id wins over an `_id` of the same spelling. */
export async function documentsOf(store: Store, queue: string, ids: string[]): Promise<Map<string, CloudqDocument>> {
  const byId = new Map<string, CloudqDocument>();
  if (ids.length === 0) return byId;
  if (store.server.equalitiesOnly) {
    for (const document of await Promise.all(ids.map((id) => findDocument(store, queue, id)))) {
      if (document) byId.set(idOf(document), document);
    }
    return byId;
  }
  const [bySlot, byKey] = await Promise.all(jobsFilters(queue, ids).map((filter) => store.jobs.find(filter).toArray()));
  for (const document of [...(byKey ?? []), ...(bySlot ?? [])]) byId.set(idOf(document), document);
  return byId;
}

/** The jobs of these ids, in order (null where there is none), found with two indexed queries. */
export async function getJobs(store: Store, queue: string, ids: string[]): Promise<Array<Job | null>> {
  const byId = await documentsOf(store, queue, ids);
  return ids.map((id) => {
    const document = byId.get(id);
    return document ? documentToJob(document, store.layout.stateField, store.now()) : null;
  });
}

/** One countDocuments per state, each served by the (queue, state, ...) index. */
export async function countJobs(store: Store, queue: string): Promise<JobCounts> {
  const now = store.now();
  const counts = emptyCounts();
  const states = Object.keys(counts) as JobState[];
  await Promise.all(
    states.map(async (state) => {
      const filter = stateFilter(queue, store.layout.stateField, state, now);
      counts[state] = filter ? await store.jobs.countDocuments(filter) : 0;
    }),
  );
  return counts;
}

/**
 * Pages in `_id` order with the last `_id` seen as the cursor: stable while jobs come and go.
 * Every document Switchyard or a Mongo-era server writes has an ObjectId `_id`, but a hand-inserted
 * one may have a string or a number, so the cursor keeps the type (as extended JSON) and the next
 * page also takes every `_id` of a type that sorts later (numbers, then strings, then ObjectIds).
 */
export async function pageJobs(
  store: Store,
  filter: Record<string, unknown> | null,
  limit = DEFAULT_PAGE,
  cursor?: string,
): Promise<Page<Job>> {
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new ValidationError(`cloudq-mongo: limit must be an integer from 1 to ${MAX_PAGE}`, { limit });
  }
  const after = positionOf(
    decodeCursor(cursor, (value): value is object => typeof value === "object" && value !== null),
    cursor,
  );
  if (!filter) return { items: [], cursor: null };
  const query = after === undefined ? filter : { $and: [filter, afterId(after)] };
  const documents = await store.jobs
    .find(query)
    .sort({ _id: 1 })
    .limit(limit + 1)
    .toArray();
  const page = documents.slice(0, limit);
  const now = store.now();
  const last = page.at(-1);
  return {
    items: page.map((document) => documentToJob(document, store.layout.stateField, now)),
    cursor: documents.length > limit && last ? encodeCursor(BSON.EJSON.serialize({ _id: last._id })) : null,
  };
}

/** The `$type` aliases of the `_id` types a job document may have, in MongoDB's sort order. */
const ID_TYPE_ORDER = ["number", "string", "objectId"] as const;

/** The `_id` a cursor holds, of one of the types a job document may have. */
function positionOf(value: object | undefined, cursor: string | undefined): { _id: DocumentId } | undefined {
  if (value === undefined) return undefined;
  let _id: unknown;
  try {
    _id = (BSON.EJSON.deserialize(value as Record<string, unknown>) as { _id?: unknown })._id;
  } catch {
    _id = undefined;
  }
  if (_id instanceof ObjectId || typeof _id === "string" || typeof _id === "number") return { _id };
  throw new ValidationError(`cloudq-mongo: invalid cursor "${cursor}"`);
}

function afterId(after: { _id: DocumentId }): Record<string, unknown> {
  const { _id } = after;
  const type = _id instanceof ObjectId ? "objectId" : typeof _id === "string" ? "string" : "number";
  const later = ID_TYPE_ORDER.slice(ID_TYPE_ORDER.indexOf(type) + 1);
  return later.length === 0 ? { _id: { $gt: _id } } : { $or: [{ _id: { $gt: _id } }, { _id: { $type: [...later] } }] };
}

export function listFilter(store: Store, queue: string, state: JobState): Record<string, unknown> | null {
  return stateFilter(queue, store.layout.stateField, state, store.now());
}

export async function queueNames(store: Store): Promise<string[]> {
  return namesOf(await store.jobs.distinct("queue"));
}

const namesOf = (names: unknown[]): string[] => names.filter((name): name is string => typeof name === "string").sort();

/**
 * The queues holding a job under `id` (core's JobLookup), as jobFilter finds it in each: by
 * `switchyard.id` (a caller-chosen id, such as a qless jid), or by `_id` in each spelling an id may
 * have. One `distinct` per field and spelling, all at once, each an equality: FerretDB 1.24 hands
 * an equality to PostgreSQL (a distinct's on a nested field too), but reads and decodes every
 * document of the collection for an `$in` or an `$or` (a lookup grew from 1 ms to 120 ms at 2,000
 * documents).
 */
export async function queuesHolding(store: Store, id: string): Promise<string[]> {
  const filters = [{ "switchyard.id": id }, ...idSpellings(id).map((_id) => ({ _id }))];
  const found = await Promise.all(filters.map((filter) => store.jobs.distinct("queue", filter)));
  return [...new Set(namesOf(found.flat()))];
}
