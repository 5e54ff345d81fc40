import { ObjectId } from "mongodb";

/**
 * Job ids. A Cloudq job's id is its `_id` ObjectId as a hex string: that is what every Mongo-era
 * server returned as `id` and what their DELETE looks up. Switchyard keeps that for every job it
 * creates. An id chosen by a caller or carried over by import() that cannot be the `_id` (it is not
 * 24 lower-case hex digits, or that ObjectId is taken by a job of another queue) is kept in
 * `switchyard.id`, with `switchyard.idSlot` making it unique within its queue, and the document
 * gets a fresh ObjectId `_id` that legacy servers can still address.
 */
const OBJECT_ID_HEX = /^[0-9a-f]{24}$/;

export function asObjectId(id: string): ObjectId | null {
  return OBJECT_ID_HEX.test(id) ? new ObjectId(id) : null;
}

/** The value of `switchyard.idSlot`: unique across the collection, so an id is unique per queue. */
export function idSlot(queue: string, id: string): string {
  return JSON.stringify([queue, id]);
}

/** The value of `switchyard.uniqueSlot` while a job with a unique key is unfinished. */
export function uniqueSlot(queue: string, key: string): string {
  return JSON.stringify([queue, key]);
}

/**
 * A filter for the job `id` of `queue`, whichever way its id is stored: an ObjectId `_id`, a
 * caller-chosen id in `switchyard.id`, or a string or integer `_id` of a hand-inserted document.
 */
export function jobFilter(queue: string, id: string): Record<string, unknown> {
  return { queue, $or: [{ "switchyard.idSlot": idSlot(queue, id) }, ...idSpellings(id).map((_id) => ({ _id }))] };
}

/** Each `_id` a document shown as `id` may have: the text itself, its ObjectId, its integer. */
export function idSpellings(id: string): Array<string | number | ObjectId> {
  const spellings: Array<string | number | ObjectId> = [id];
  const objectId = asObjectId(id);
  if (objectId) spellings.push(objectId);
  if (/^-?[0-9]{1,15}$/.test(id)) spellings.push(Number(id));
  return spellings;
}

/** The id a document shows as Job.id. */
export function idOf(document: { _id: unknown; switchyard?: { id?: string } }): string {
  if (document.switchyard?.id !== undefined) return document.switchyard.id;
  const raw = document._id;
  return raw instanceof ObjectId ? raw.toHexString() : String(raw);
}

/** The MongoDB error code of a unique index violation. */
export function isDuplicateKey(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === 11000;
}

/**
 * Filters that find the jobs of many ids without `$or`, each `$in` served by an index on MongoDB:
 * caller-chosen ids by their `switchyard.idSlot`, the others by `_id` in each spelling an id may
 * have. (FerretDB 1.x reads every document for either; reads.ts looks each id up by equalities there.)
 */
export function jobsFilters(queue: string, ids: string[]): Array<Record<string, unknown>> {
  const rawIds = ids.flatMap(idSpellings);
  return [{ "switchyard.idSlot": { $in: ids.map((id) => idSlot(queue, id)) } }, { queue, _id: { $in: rawIds } }];
}
