import type { AnyBulkWriteOperation } from "mongodb";
import { type CloudqDocument, type DocumentId, NATIVE } from "./document.js";
import { idOf } from "./ids.js";
import { findDocument } from "./reads.js";
import { type Store, update } from "./store.js";
import { releaseTokens, takeToken, tokenOf } from "./tokens.js";

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
    const document = await findDocument(store, queue, parent);
    const state = document?.[stateField];
    if (document && state !== NATIVE.deleted) pending.push(parent);
  }
  return pending;
}

/** A blocked job as a release reads it: its `_id`, its attempts (which name its claim token) and its parents. */
export type BlockedJob = Pick<CloudqDocument, "_id" | "switchyard">;

/**
 * Matches a job whose parents are still exactly `stored` (its `switchyard.dependsOn` as read), so
 * that a release checked against one list never lands on a job whose parents were changed since
 * (dependency-editing.ts): the editor re-checks its own list after writing it.
 */
export function parentsAre(stored: string[] | undefined): Record<string, unknown> {
  return { "switchyard.dependsOn": stored ?? { $exists: false } };
}

/**
 * Runs `work`, which changes a blocked job, holding the claim token of the job's next attempt
 * (tokens.ts) when `claimTokens` is on; undefined, with nothing done, when another holds it. On
 * FerretDB a conditional update reads and then writes the whole document, so two changes of one
 * job (a release and an edit of its parents, or two edits) could each undo the other; holding the
 * token makes them take turns, and keeps reserves off the job until the change is written.
 */
export async function holdingJobToken<T>(store: Store, job: BlockedJob, work: () => Promise<T>): Promise<{ value: T } | undefined> {
  if (!store.layout.claimTokens) return { value: await work() };
  const token = tokenOf(job);
  if (!(await takeToken(store, token))) return undefined;
  try {
    return { value: await work() };
  } finally {
    await releaseTokens(store, [token], { wait: true }).catch(() => undefined);
  }
}

/** A short, growing and spread-out pause before another try at a token someone else holds. */
export function pauseBeforeRetry(round: number): Promise<void> {
  const ms = Math.min(50, 5 * (round + 1)) * (0.5 + Math.random());
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Tries at a job's token before a release writes without it (see releaseIfReady). */
const MAX_RELEASE_ROUNDS = 20;

/**
 * Moves a blocked job to `queued` once none of its parents is pending. The write is conditional
 * on the job still being blocked on the very parents checked, so two completions racing to release
 * it release it once, and a release never lands on parents an edit changed meanwhile (the edit
 * re-checks). A token held past every try belongs to a process that died: the release is then
 * written without it, since a job left blocked for good is worse than the race the token prevents.
 */
export async function releaseIfReady(store: Store, queue: string, job: BlockedJob): Promise<boolean> {
  const stored = job.switchyard?.dependsOn;
  if ((await unfinishedParents(store, queue, stored ?? [])).length > 0) return false;
  for (let round = 0; round < MAX_RELEASE_ROUNDS; round++) {
    const held = await holdingJobToken(store, job, () => releaseWrite(store, job._id, stored));
    if (held) return held.value;
    await pauseBeforeRetry(round);
  }
  return releaseWrite(store, job._id, stored);
}

/** The release itself, for a caller that checked the parents and holds the job's token: blocked on `stored` -> queued. */
export async function releaseWrite(store: Store, _id: DocumentId, stored: string[] | undefined): Promise<boolean> {
  const { stateField } = store.layout;
  const result = await store.jobs.updateOne(
    { _id, [stateField]: NATIVE.blocked, ...parentsAre(stored) },
    update({ $set: { [stateField]: NATIVE.queued, updated_at: new Date(store.now()) } }),
  );
  return result.modifiedCount > 0;
}

/** After `id` completed: releases each job of the queue that was blocked on it and on nothing else pending. */
export async function releaseDependents(store: Store, queue: string, id: string): Promise<void> {
  const { stateField } = store.layout;
  const dependents = await store.jobs
    .find(
      { queue, [stateField]: NATIVE.blocked, "switchyard.dependsOn": id },
      { projection: { _id: 1, "switchyard.dependsOn": 1, "switchyard.attempts": 1 } },
    )
    .toArray();
  for (const dependent of dependents) await releaseIfReady(store, queue, dependent);
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
