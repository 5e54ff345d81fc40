import { DEFAULT_MAX_ATTEMPTS, type ImportResult, type Job, JobSchema, parseOrThrow } from "@switchyard/core";
import { z } from "zod";
import { type DocumentId, type SwitchyardFields, isStorable, priorityFields } from "./document.js";
import { buildDocument, insertDocument, undoPartialWrite } from "./enqueue.js";
import { uniqueSlot } from "./ids.js";
import { nativeStateFor } from "./queries.js";
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
    for (const [index, job] of kept.entries()) {
      const document = documents[index] as (typeof documents)[number];
      const outcome = await insertDocument(store, { queue, document, id: job.id, onUniqueConflict: "drop-slot" });
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
