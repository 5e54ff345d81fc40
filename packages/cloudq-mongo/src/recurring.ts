import type { Recurrence } from "@switchyard/core";
import type { Store } from "./store.js";
import { releaseTokens, takeToken } from "./tokens.js";

/**
 * A recurring job's definition (core's RecurringJobs; qless's `recur` on a Cloudq store), one
 * document per recurrence in a side collection (`cloudq.recurring`) that the legacy servers never
 * read. Data and native fields are arbitrary JSON, so they are kept as JSON text: keys MongoDB
 * refuses (`$`, `.`, NUL) and NUL bytes in values come back as they went in. Times and the interval
 * are plain numbers (doubles where they hold a fraction: qless's `recur` takes fractions of a second).
 */
export interface RecurrenceDocument {
  /** Recurrence.id: ids are the store's, not a queue's, as qless's jids are global. */
  _id: string;
  queue: string;
  name: string;
  /** Recurrence.data as JSON text. */
  dataJson: string;
  priority: number;
  tags: string[];
  maxAttempts: number;
  intervalMs: number;
  nextAt: number;
  count: number;
  backlog: number;
  /** Recurrence.native as JSON text. */
  nativeJson: string;
}

function toDocument(recurrence: Recurrence): Omit<RecurrenceDocument, "_id"> {
  return {
    queue: recurrence.queue,
    name: recurrence.name,
    dataJson: JSON.stringify(recurrence.data),
    priority: recurrence.priority,
    tags: recurrence.tags,
    maxAttempts: recurrence.maxAttempts,
    intervalMs: recurrence.intervalMs,
    nextAt: recurrence.nextAt,
    count: recurrence.count,
    backlog: recurrence.backlog,
    nativeJson: JSON.stringify(recurrence.native),
  };
}

function fromDocument(document: RecurrenceDocument): Recurrence {
  return {
    id: document._id,
    queue: document.queue,
    name: document.name,
    data: JSON.parse(document.dataJson),
    priority: document.priority,
    tags: document.tags,
    maxAttempts: document.maxAttempts,
    intervalMs: document.intervalMs,
    nextAt: document.nextAt,
    count: document.count,
    backlog: document.backlog,
    native: JSON.parse(document.nativeJson),
  };
}

/** Creates the recurrence or replaces the one with its id, whichever queue that was in. */
export async function putRecurrence(store: Store, recurrence: Recurrence): Promise<void> {
  await store.recurring.replaceOne({ _id: recurrence.id }, toDocument(recurrence), { upsert: true });
}

export async function findRecurrence(store: Store, id: string): Promise<Recurrence | null> {
  const document = await store.recurring.findOne({ _id: id });
  return document ? fromDocument(document) : null;
}

/**
 * The queue's recurrences, next due first, then by id: the simple collation compares strings byte
 * by byte, as Redis orders a sorted set's ties. Served by the index on (queue, nextAt, _id).
 */
export async function queueRecurrences(store: Store, queue: string): Promise<Recurrence[]> {
  const documents = await store.recurring.find({ queue }).sort({ nextAt: 1, _id: 1 }).toArray();
  return documents.map(fromDocument);
}

export async function removeRecurrence(store: Store, id: string): Promise<boolean> {
  return (await store.recurring.deleteOne({ _id: id })).deletedCount > 0;
}

/**
 * The compare-and-set of core's advanceRecurrence: `count` and `nextAt` move only while the stored
 * count is `seen`. On MongoDB the conditional update is atomic by itself; FerretDB 1.x reads and
 * then writes unconditionally, so two callers that saw the same count could both match. With
 * `claimTokens` on, the update is therefore made only by the caller that inserts the token of
 * (id, seen) into the claims collection (tokens.ts); the other is told false at once. The token is
 * given back after the write, so a later caller with the same count (a recurrence put again) is
 * answered by the update itself; one left by a caller that died is swept after STALE_TOKEN_MS.
 */
export async function advanceRecurrence(store: Store, id: string, seen: number, count: number, nextAt: number): Promise<boolean> {
  const update = async () => (await store.recurring.updateOne({ _id: id, count: seen }, { $set: { count, nextAt } })).matchedCount > 0;
  if (!store.layout.claimTokens) return update();
  // Job tokens end in `:<attempt>`; this suffix keeps a recurrence's from ever naming one.
  const token = `${id}:${seen}:recurrence`;
  if (!(await takeToken(store, token))) return false;
  try {
    return await update();
  } finally {
    await releaseTokens(store, [token], { wait: true }).catch(() => undefined);
  }
}
