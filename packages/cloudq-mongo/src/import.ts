import { DEFAULT_MAX_ATTEMPTS, type ImportResult, type Job, JobSchema, parseOrThrow } from "@switchyard/core";
import { MongoBulkWriteError, ObjectId } from "mongodb";
import { z } from "zod";
import { type CloudqDocument, type DocumentId, type SwitchyardFields, isStorable, priorityFields } from "./document.js";
import { buildDocument, insertDocument, undoPartialWrite, withExtras } from "./enqueue.js";
import { asObjectId, idSlot, uniqueSlot } from "./ids.js";
import { nativeStateFor } from "./queries.js";
import { documentsOf } from "./reads.js";
import type { Store } from "./store.js";

/**
 * Writes jobs as they are, for migration. Ids, attempts, timestamps, errors and native fields are
 * kept; an active job arrives queued (its lease belonged to the old store). A completed job in
 * `remove` mode is counted as imported but not written: that mode keeps no completed documents.
 * All or nothing: every document is built (and so checked) first, and a failure midway removes
 * what this call wrote.
 */
export async function importJobs(store: Store, queue: string, jobs: Job[]): Promise<ImportResult> {
  const checked = parseOrThrow(z.array(JobSchema), jobs, "jobs");
  const kept = checked.filter((job) => !(job.state === "completed" && store.layout.completion === "remove"));
  const documents = kept.map((job) =>
    buildDocument(store, queue, {
      name: job.name,
      data: job.data,
      native: job.native,
      nativeState: nativeStateFor(job.state),
      createdAt: job.createdAt,
      extras: extrasOf(queue, job),
    }),
  );
  let imported = checked.length - kept.length;
  const skipped: string[] = [];
  const written: DocumentId[] = [];
  try {
    // Two indexed lookups find the ids the queue already holds; the rest go in one insertMany.
    const held = await documentsOf(
      store,
      queue,
      kept.map((job) => job.id),
    );
    const fresh: Array<{ job: Job; document: CloudqDocument }> = [];
    kept.forEach((job, i) => {
      if (held.has(job.id)) skipped.push(job.id);
      else fresh.push({ job, document: withStoredId(queue, job.id, documents[i] as (typeof documents)[number]) });
    });
    const first = await insertAll(
      store,
      fresh.map((entry) => entry.document),
    );
    written.push(...fresh.filter((_, i) => !first.has(i)).map((entry) => entry.document._id));
    // An ObjectId id another queue's job already has as its _id (a copy within one store): the id
    // goes in `switchyard` instead, as insertDocument does, again in one insertMany.
    const retried = [...first].map((i) => fresh[i] as (typeof fresh)[number]);
    for (const entry of retried) entry.document = aliased(queue, entry.job.id, entry.document);
    const again = await insertAll(
      store,
      retried.map((entry) => entry.document),
    );
    written.push(...retried.filter((_, i) => !again.has(i)).map((entry) => entry.document._id));
    const refused = [...again].map((i) => retried[i] as (typeof retried)[number]);
    imported += fresh.length - refused.length;
    // One a concurrent writer or a unique key got in the way of goes the careful way, one by one.
    for (const { job, document } of refused) {
      const { _id: _unused, ...rest } = document;
      const outcome = await insertDocument(store, { queue, document: rest, id: job.id, onUniqueConflict: "drop-slot" });
      if (outcome.created) {
        imported++;
        written.push(outcome.document._id);
      } else skipped.push(job.id);
    }
  } catch (error) {
    return undoPartialWrite(store, written, error, "import");
  }
  return { imported, skipped };
}

/** The document with the `_id` an imported id gets: the id itself when it is an ObjectId, else a new one with the id in `switchyard`. */
function withStoredId(queue: string, id: string, document: Omit<CloudqDocument, "_id">): CloudqDocument {
  const objectId = asObjectId(id);
  return objectId ? ({ _id: objectId, ...document } as CloudqDocument) : aliased(queue, id, document);
}

function aliased(queue: string, id: string, document: Omit<CloudqDocument, "_id"> | CloudqDocument): CloudqDocument {
  const { _id: _unused, ...rest } = document as CloudqDocument;
  return { _id: new ObjectId(), ...withExtras(rest, { id, idSlot: idSlot(queue, id) }) } as CloudqDocument;
}

/** Inserts the documents in one unordered insertMany; answers the indexes refused as duplicates. */
async function insertAll(store: Store, documents: CloudqDocument[]): Promise<Set<number>> {
  if (documents.length === 0) return new Set();
  try {
    await store.jobs.insertMany(documents, { ordered: false });
    return new Set();
  } catch (error) {
    const failures =
      error instanceof MongoBulkWriteError ? (Array.isArray(error.writeErrors) ? error.writeErrors : [error.writeErrors]) : null;
    if (!failures || failures.some((failure) => failure.code !== 11000)) throw error;
    return new Set(failures.map((failure) => failure.index));
  }
}

function extrasOf(queue: string, job: Job): SwitchyardFields {
  const unfinished = job.state === "waiting" || job.state === "delayed" || job.state === "active" || job.state === "blocked";
  return {
    ...priorityFields(job.priority),
    runAt: job.state === "delayed" && job.runAt !== null ? job.runAt : undefined,
    attempts: job.attempts > 0 ? job.attempts : undefined,
    maxAttempts: job.maxAttempts === DEFAULT_MAX_ATTEMPTS ? undefined : job.maxAttempts,
    backoff: job.backoff ?? undefined,
    uniqueKey: job.uniqueKey ?? undefined,
    uniqueSlot: job.uniqueKey !== null && unfinished ? uniqueSlot(queue, job.uniqueKey) : undefined,
    ...jsonExtras("result", job.result),
    error: job.error ?? undefined,
    ...jsonExtras("progress", job.progress),
    startedAt: job.startedAt ?? undefined,
    finishedAt: !unfinished ? (job.finishedAt ?? undefined) : undefined,
    tags: job.tags.length > 0 ? job.tags : undefined,
    dependsOn: job.dependsOn.length > 0 ? job.dependsOn : undefined,
  };
}

/** A result or progress as an imported document holds it: itself, or as JSON (see jsonFields). */
function jsonExtras(field: "result" | "progress", value: Job["result"]): SwitchyardFields {
  if (value === null) return {};
  return isStorable(value) ? { [field]: value } : { [`${field}Json`]: JSON.stringify(value) };
}
