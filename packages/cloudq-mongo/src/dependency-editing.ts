import { ConflictError, InvalidStateError, type Job, NotFoundError, ValidationError } from "@switchyard/core";
import { holdingJobToken, parentsAre, pauseBeforeRetry, releaseWrite, unfinishedParents } from "./dependencies.js";
import { type CloudqDocument, NATIVE, coreStateOf, documentToJob } from "./document.js";
import { findDocument } from "./reads.js";
import { type Store, update } from "./store.js";

/**
 * DependencyEditing on the Cloudq layout: what qless's `depends on/off` does to a job waiting on
 * others. The job stays a `blocked` document (which no legacy reserve takes) with its parents in
 * `switchyard.dependsOn`; only the parents it still waits for are kept, as qless keeps them in its
 * set, so a missing or completed parent is not waited for. Waiting for none, the job is `queued`
 * at once, its run-at time dropped, as `depends off` puts it in the work queue.
 *
 * A parent's completion releases the jobs that list it (dependencies.ts), so an edit must never
 * leave a job listing only completed parents with no one left to release it:
 * - the edit writes the new list conditionally on the list it read (a compare-and-set), then
 *   checks the parents it wrote once more and releases the job if they have all completed: a
 *   completion either finds the new list (its release checks it) or came before that check;
 * - a release writes only while the job still lists the parents it checked (parentsAre), so one
 *   that checked the old list cannot release a job whose new parent is unfinished;
 * - with `claimTokens` on, the edit and the releases of one job take turns holding its claim token
 *   (holdingJobToken), since FerretDB's conditional updates are a read and an unconditional write.
 */

/** Tries before an edit that keeps finding the job's token held, or its parents changed, gives up. */
const MAX_EDIT_ROUNDS = 40;

export function addDependencies(store: Store, queue: string, id: string, parents: string[]): Promise<Job> {
  checkParents(parents, "addDependencies");
  return changeDependencies(store, queue, id, (now) => [...now, ...parents]);
}

export function removeDependencies(store: Store, queue: string, id: string, parents: string[] | "all"): Promise<Job> {
  if (parents === "all") return changeDependencies(store, queue, id, () => []);
  checkParents(parents, "removeDependencies");
  const removed = new Set(parents);
  return changeDependencies(store, queue, id, (now) => now.filter((parent) => !removed.has(parent)));
}

function checkParents(parents: unknown, what: string): void {
  if (!Array.isArray(parents) || parents.some((parent) => typeof parent !== "string")) {
    throw new ValidationError(`cloudq-mongo: ${what} takes an array of job ids`);
  }
}

/**
 * The blocked job's parents changed to the unfinished ones of `change(its parents)`. A job that is
 * not blocked is refused as it is; the job is answered as it is after the change (a release that
 * overtook the edit shows as waiting).
 */
async function changeDependencies(store: Store, queue: string, id: string, change: (parents: string[]) => string[]): Promise<Job> {
  for (let round = 0; round < MAX_EDIT_ROUNDS; round++) {
    const document = await findDocument(store, queue, id);
    if (!document) throw notFound(queue, id);
    const state = coreStateOf(document, store.layout.stateField, store.now());
    if (state !== "blocked") {
      throw new InvalidStateError(`cloudq-mongo: cannot change the dependencies of job ${id}: it is ${state}`, { queue, id, state });
    }
    const held = await holdingJobToken(store, document, () => writeParents(store, queue, id, document, change));
    if (held?.value) return held.value;
    // A held token is another change of this job under way: give it a moment. A missed
    // compare-and-set means that change is written: read the job again at once.
    if (!held) await pauseBeforeRetry(round);
  }
  throw new ConflictError(`cloudq-mongo: job ${id} kept changing while its dependencies were being changed; retry`, { queue, id });
}

/** One try: null when the job's state or parents changed since `document` was read. */
async function writeParents(
  store: Store,
  queue: string,
  id: string,
  document: CloudqDocument,
  change: (parents: string[]) => string[],
): Promise<Job | null> {
  const { stateField } = store.layout;
  const stored = document.switchyard?.dependsOn;
  const parents = await unfinishedParents(store, queue, change(stored ?? []));
  const at = new Date(store.now());
  const changes =
    parents.length > 0
      ? { $set: { "switchyard.dependsOn": parents, updated_at: at } }
      : { $set: { [stateField]: NATIVE.queued, updated_at: at }, $unset: { "switchyard.dependsOn": "", "switchyard.runAt": "" } };
  const written = await store.jobs.updateOne({ _id: document._id, [stateField]: NATIVE.blocked, ...parentsAre(stored) }, update(changes));
  if (written.matchedCount === 0) return null;
  // A parent may have completed after it was read above, its release finding the old list or
  // none; this token holder checks the list it wrote (releaseIfReady would wait for the token).
  if (parents.length > 0 && (await unfinishedParents(store, queue, parents)).length === 0) await releaseWrite(store, document._id, parents);
  const after = await store.jobs.findOne({ _id: document._id });
  if (!after) throw notFound(queue, id);
  return documentToJob(after, stateField, store.now());
}

function notFound(queue: string, id: string): NotFoundError {
  return new NotFoundError(`cloudq-mongo: no job ${id} in queue ${queue}`, { queue, id });
}
