import type { AnyBulkWriteOperation } from "mongodb";
import { type CloudqDocument, type DocumentId, NATIVE } from "./document.js";
import { idOf, jobFilter } from "./ids.js";
import { type Store, update } from "./store.js";

/** The states of a job that has not finished; a dependent waits while any of its parents is in one. */
export const UNFINISHED = [NATIVE.queued, NATIVE.reserved, NATIVE.blocked];

/**
 * Which of `parents` (job ids of the same queue) have not completed yet. A parent that is gone
 * counts as completed, since `remove` mode deletes completed jobs; a failed or canceled parent
 * keeps its dependents blocked, as qless does, until it is retried and completes.
 */
export async function unfinishedParents(store: Store, queue: string, parents: string[]): Promise<string[]> {
  const { stateField } = store.layout;
  const pending: string[] = [];
  for (const parent of new Set(parents)) {
    const document = await store.jobs.findOne({ ...jobFilter(queue, parent) }, { projection: { [stateField]: 1 } });
    const state = document?.[stateField];
    if (document && state !== NATIVE.deleted) pending.push(parent);
  }
  return pending;
}

/**
 * Moves a blocked job to `queued` once none of its parents is pending. The write is conditional
 * on the job still being blocked, so two completions racing to release it release it once.
 */
export async function releaseIfReady(store: Store, queue: string, child: { _id: DocumentId; parents: string[] }): Promise<boolean> {
  if ((await unfinishedParents(store, queue, child.parents)).length > 0) return false;
  const { stateField } = store.layout;
  const result = await store.jobs.updateOne(
    { _id: child._id, [stateField]: NATIVE.blocked },
    update({ $set: { [stateField]: NATIVE.queued, updated_at: new Date(store.now()) } }),
  );
  return result.modifiedCount > 0;
}

/** After `id` completed: releases each job of the queue that was blocked on it and on nothing else pending. */
export async function releaseDependents(store: Store, queue: string, id: string): Promise<void> {
  const { stateField } = store.layout;
  const dependents = await store.jobs
    .find({ queue, [stateField]: NATIVE.blocked, "switchyard.dependsOn": id }, { projection: { _id: 1, "switchyard.dependsOn": 1 } })
    .toArray();
  for (const dependent of dependents) {
    await releaseIfReady(store, queue, { _id: dependent._id, parents: dependent.switchyard?.dependsOn ?? [] });
  }
}

/**
 * A field no document holds: the dependents probe `$unset`s it, so the statement matches the
 * blocked dependents of a completed job and changes nothing.
 */
const PROBE_FIELD = "switchyard.dependentsProbe";

/**
 * An update statement that finds whether `id` (just completed) has blocked dependents without a
 * command of its own: it rides in the update command of the completion or of the next claims,
 * after the completion, and matches them without modifying anything, so the command's matched
 * count exceeds its modified count by their number. Only then does releaseDependents() run.
 */
export function dependentsProbe(store: Store, queue: string, id: string): AnyBulkWriteOperation<CloudqDocument> {
  return {
    updateMany: {
      filter: { queue, [store.layout.stateField]: NATIVE.blocked, "switchyard.dependsOn": id },
      update: update({ $unset: { [PROBE_FIELD]: "" } }),
    },
  };
}

/** DependentsLookup: for each of `ids`, the blocked jobs of the queue that wait for it, in insertion (`_id`) order. */
export async function dependentsOf(store: Store, queue: string, ids: string[]): Promise<Map<string, string[]>> {
  const wanted = new Set(ids);
  const dependents = new Map<string, string[]>();
  const waiting = await store.jobs
    .find(
      { queue, [store.layout.stateField]: NATIVE.blocked, "switchyard.dependsOn": { $in: ids } },
      { projection: { _id: 1, "switchyard.id": 1, "switchyard.dependsOn": 1 } },
    )
    .sort({ _id: 1 })
    .toArray();
  for (const document of waiting) {
    for (const parent of document.switchyard?.dependsOn ?? []) {
      if (wanted.has(parent)) dependents.set(parent, [...(dependents.get(parent) ?? []), idOf(document)]);
    }
  }
  return dependents;
}
