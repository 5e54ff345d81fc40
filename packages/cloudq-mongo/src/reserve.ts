import type { CompleteOptions, CompletedAndNext, Job } from "@switchyard/core";
import { type AnyBulkWriteOperation, ObjectId } from "mongodb";
import { type Candidate, type PoolHandle, closePool, giveBack, openPool, releaseHeld, takeCandidates, tokenUsable } from "./candidates.js";
import { dependentsProbe, releaseDependents } from "./dependencies.js";
import { type CloudqDocument, NATIVE, documentToJob } from "./document.js";
import { forgetHanded, rememberHanded } from "./handed.js";
import { claimableFilter } from "./queries.js";
import { type Store, update } from "./store.js";
import { type LeadCompletion, completedJob, completionStatement, refusedFirstStatement, writeCompletion } from "./transitions.js";

/** A bound on rounds of claims when claims keep missing (each round claims or drops candidates). */
const MAX_ROUNDS = 50;

export interface ClaimRequest {
  worker: string;
  count: number;
  leaseMs: number;
}

/**
 * reserve(): the pause check and, at the same time, candidates with their tokens (both usually in
 * hand or one round trip away), then ONE update command claiming them (claimWrite). A queue seen
 * paused is checked before anything else is done for it.
 */
export async function reserveJobs(store: Store, queue: string, request: ClaimRequest): Promise<Job[]> {
  const handle = openPool(store, queue);
  try {
    const gate = isPaused(store, queue);
    const prepared = candidatesUnlessPaused(store, handle, request.count, gate);
    const [paused, candidates] = await settled(store, handle, gate, prepared);
    if (paused) {
      giveBack(store, handle, candidates);
      return [];
    }
    return (await claimNext(store, handle, request, candidates)).jobs;
  } finally {
    closePool(store, handle);
  }
}

/**
 * completeAndReserve(). In `mark-deleted` mode, for a job this backend handed out: the pause check
 * and the next candidates (usually in hand), then ONE update command holding the completion, the
 * claims of the next jobs and the probe for the completed job's blocked dependents; a completion
 * that command refuses claims nothing (see completionStatement) and is made again the ordinary
 * way, which says why. Otherwise (`remove` mode deletes, and a delete cannot share a command with
 * updates): the completion write (the same one complete() makes), the pause check and the next
 * candidates in parallel, then ONE update command holding the claims and the probe. A refused
 * completion claims nothing and throws what complete() throws; the candidates taken meanwhile go
 * back to the pool.
 */
export async function completeAndClaim(
  store: Store,
  queue: string,
  id: string,
  options: CompleteOptions,
  request: ClaimRequest,
): Promise<CompletedAndNext> {
  const handle = openPool(store, queue);
  try {
    const lead = completionStatement(store, queue, id, options);
    if (lead) {
      const gate = isPaused(store, queue);
      const prepared = candidatesUnlessPaused(store, handle, request.count, gate);
      const [paused, candidates] = await settled(store, handle, gate, prepared);
      if (paused) giveBack(store, handle, candidates);
      const first = paused ? [] : candidates;
      const fused = await claimNext(store, handle, request, first, { lead });
      forgetHanded(store, queue, id);
      if (fused.completed) {
        if (fused.dependents) await releaseDependents(store, queue, fused.completed.id);
        return { completed: completedJob(store, fused.completed.written, options), next: fused.jobs };
      }
      // The held document was stale or the job is no longer this worker's: nothing was claimed.
      giveBack(store, handle, first);
    }
    const completion = writeCompletion(store, queue, id, options);
    const gate = isPaused(store, queue);
    const prepared = candidatesUnlessPaused(store, handle, request.count, gate);
    const [written, pause, next] = await Promise.allSettled([completion, gate, prepared]);
    const candidates = next.status === "fulfilled" ? next.value : [];
    if (written.status === "rejected" || "refused" in written.value) {
      giveBack(store, handle, candidates);
      throw written.status === "rejected" ? written.reason : (written.value as { refused: Error }).refused;
    }
    const completed = completedJob(store, written.value, options);
    const problem = pause.status === "rejected" ? pause.reason : next.status === "rejected" ? next.reason : undefined;
    if (problem !== undefined || (pause.status === "fulfilled" && pause.value) || candidates.length === 0) {
      giveBack(store, handle, candidates);
      await releaseDependents(store, queue, completed.id);
      if (problem !== undefined) throw problem;
      return { completed, next: [] };
    }
    const claimed = await claimNext(store, handle, request, candidates, { probeFor: completed.id });
    if (claimed.dependents) await releaseDependents(store, queue, completed.id);
    return { completed, next: claimed.jobs };
  } finally {
    closePool(store, handle);
  }
}

/** What the first write of claimNext also carries: a completion to lead it, or the probe of one already made. */
interface FirstWrite {
  lead?: (now: number) => LeadCompletion;
  probeFor?: string;
}

/**
 * Claims `candidates`, then, while fewer than `count` jobs are claimed, takes more candidates and
 * claims again, until the pool has none. The first write also carries `first.lead` (then
 * `completed` says whether it took; if not, nothing was claimed) or the dependents probe of
 * `first.probeFor` (`dependents` says whether the completed job has blocked dependents).
 */
async function claimNext(
  store: Store,
  handle: PoolHandle,
  request: ClaimRequest,
  firstCandidates: Candidate[],
  first: FirstWrite = {},
): Promise<{ jobs: Job[]; dependents: boolean; completed?: LeadCompletion }> {
  const jobs: Job[] = [];
  const outcome = await claimWrite(store, handle.queue, firstCandidates, request, first);
  if (outcome.refused) return { jobs, dependents: false };
  jobs.push(...outcome.claimed);
  if (outcome.missed.length > 0) releaseHeld(store, outcome.missed);
  // No candidates to begin with (nothing claimable, or the queue is paused): none are sought.
  for (let round = 1; round < MAX_ROUNDS && firstCandidates.length > 0 && jobs.length < request.count; round++) {
    const candidates = await takeCandidates(store, handle, request.count - jobs.length);
    if (candidates.length === 0) break;
    const more = await claimWrite(store, handle.queue, candidates, request);
    jobs.push(...more.claimed);
    if (more.missed.length > 0) releaseHeld(store, more.missed);
  }
  return { jobs, dependents: outcome.dependents, ...(outcome.completed ? { completed: outcome.completed } : {}) };
}

/**
 * ONE update command (a bulkWrite of update statements) holding a guarded claim per candidate:
 * its filter is the whole claimable condition (queued and due, or reserved with an expired lease)
 * plus the candidate's `_id`, the attempt count and `updated_at` it was read with (and, for an
 * expired lease, the progress), so the server re-checks everything as it marks the document,
 * whatever any other reserver (Switchyard or a legacy server) did since the candidate was read,
 * and a claimed document is exactly its candidate plus the claim's changes. The command may be
 * led by a completion (`first.lead`, which stops it when refused) and ends with the completed
 * job's dependents probe (dependencies.ts).
 *
 * Servers answer an update command with totals only (FerretDB 1.x and MongoDB alike; no per
 * statement counts), but every statement here that matches modifies its document (a claim
 * increments the attempts, a completion sets the state) except the probe, which modifies nothing:
 * the modified count says how many claims took (all, none, or else one find says which), and
 * matched minus modified counts the blocked dependents.
 */
async function claimWrite(
  store: Store,
  queue: string,
  all: Candidate[],
  request: ClaimRequest,
  first: FirstWrite = {},
): Promise<{ claimed: Job[]; missed: Candidate[]; dependents: boolean; completed?: LeadCompletion; refused?: true }> {
  const { stateField } = store.layout;
  // A token is used only while no sweeper can have removed it, and a job is claimed once per write.
  const seen = new Set<string>();
  const stale: Candidate[] = [];
  const candidates = all.filter((candidate) => {
    const key = candidate.token?.id ?? idKey(candidate.doc._id);
    if (seen.has(key) || !tokenUsable(store, candidate)) {
      if (!seen.has(key)) stale.push(candidate);
      return false;
    }
    seen.add(key);
    return true;
  });
  if (stale.length > 0) releaseHeld(store, stale);
  const now = store.now();
  const lead = first.lead?.(now);
  const probeFor = lead?.id ?? first.probeFor;
  if (candidates.length === 0 && probeFor === undefined) return { claimed: [], missed: [], dependents: false };
  const lease = { worker: request.worker, expiresAt: now + request.leaseMs };
  const changes = update({
    $set: { [stateField]: NATIVE.reserved, updated_at: new Date(now), "switchyard.lease": lease, "switchyard.startedAt": now },
    $inc: { "switchyard.attempts": 1 },
    $unset: { "switchyard.runAt": "" },
  });
  const statements: AnyBulkWriteOperation<CloudqDocument>[] = lead ? [lead.statement] : [];
  for (const candidate of candidates) {
    statements.push({ updateOne: { filter: claimFilter(store, queue, candidate.doc, now), update: changes } });
  }
  if (probeFor !== undefined) statements.push(dependentsProbe(store, queue, probeFor));
  let result: { matchedCount: number; modifiedCount: number };
  try {
    result = await store.jobs.bulkWrite(statements, { ordered: true });
  } catch (error) {
    // The lead completion matched nothing and stopped the command before any claim.
    if (lead && refusedFirstStatement(error)) return { claimed: [], missed: [], dependents: false, refused: true };
    throw error;
  }
  // Every statement that matched modified its document, but the probe's, which modifies nothing.
  const took = result.modifiedCount - (lead ? 1 : 0);
  const dependents = result.matchedCount > result.modifiedCount;
  let won: Set<Candidate>;
  if (took >= candidates.length) won = new Set(candidates);
  else if (took <= 0) won = new Set();
  else won = await whichClaimed(store, queue, candidates, lease, now);
  const claimed: Job[] = [];
  for (const candidate of candidates) {
    if (!won.has(candidate)) continue;
    const document = claimedDocument(store, candidate.doc, lease, now);
    const job = documentToJob(document, stateField, now);
    rememberHanded(store, queue, job.id, document);
    claimed.push(job);
  }
  const missed = candidates.filter((candidate) => !won.has(candidate));
  return { claimed, missed, dependents, ...(lead ? { completed: lead } : {}) };
}

function claimFilter(store: Store, queue: string, document: CloudqDocument, now: number): Record<string, unknown> {
  const { stateField } = store.layout;
  const extras = document.switchyard;
  const filter: Record<string, unknown> = {
    ...claimableFilter(queue, stateField, now),
    _id: document._id,
    "switchyard.attempts": extras?.attempts ?? null,
    updated_at: document.updated_at ?? null,
  };
  // An expired lease's former holder may still report progress (which does not set updated_at).
  if (document[stateField] === NATIVE.reserved) {
    filter["switchyard.progress"] = extras?.progress ?? null;
    filter["switchyard.progressJson"] = extras?.progressJson ?? null;
  }
  return filter;
}

/** The candidate document as the claim left it (the same changes the claim's update makes). */
function claimedDocument(
  store: Store,
  document: CloudqDocument,
  lease: { worker: string; expiresAt: number },
  now: number,
): CloudqDocument {
  const { runAt: _runAt, ...extras } = document.switchyard ?? {};
  return {
    ...document,
    [store.layout.stateField]: NATIVE.reserved,
    updated_at: new Date(now),
    switchyard: { ...extras, lease, startedAt: now, attempts: (extras.attempts ?? 0) + 1 },
  };
}

/** Some claims of a write took and some did not: the documents that carry this write's lease are ours. */
async function whichClaimed(
  store: Store,
  queue: string,
  candidates: Candidate[],
  lease: { worker: string; expiresAt: number },
  now: number,
): Promise<Set<Candidate>> {
  const mine = await store.jobs
    .find(
      {
        queue,
        _id: { $in: candidates.map((candidate) => candidate.doc._id) },
        [store.layout.stateField]: NATIVE.reserved,
        "switchyard.lease.worker": lease.worker,
        "switchyard.lease.expiresAt": lease.expiresAt,
        "switchyard.startedAt": now,
      } as Record<string, unknown>,
      { projection: { _id: 1 } },
    )
    .toArray();
  return new Set(candidates.filter((candidate) => mine.some((document) => sameId(document._id, candidate.doc._id))));
}

function idKey(id: unknown): string {
  return `${typeof id}:${id instanceof ObjectId ? id.toHexString() : String(id)}`;
}

function sameId(a: unknown, b: unknown): boolean {
  if (a instanceof ObjectId || b instanceof ObjectId) return a instanceof ObjectId && b instanceof ObjectId && a.equals(b);
  return a === b;
}

/** Queues this backend last saw paused: their next reserve checks the pause before anything else. */
const seenPaused = new WeakMap<Store, Set<string>>();

export function notePaused(store: Store, queue: string, paused: boolean): void {
  let queues = seenPaused.get(store);
  if (!queues) {
    if (!paused) return;
    queues = new Set();
    seenPaused.set(store, queues);
  }
  if (paused) queues.add(queue);
  else queues.delete(queue);
}

/** One findOne by `_id` on the pause collection, checked by every reserve (see README: pause). */
async function isPaused(store: Store, queue: string): Promise<boolean> {
  const paused = (await store.paused.findOne({ _id: queue }, { projection: { _id: 1 } })) !== null;
  notePaused(store, queue, paused);
  return paused;
}

/** The candidates, read at the same time as the pause check; after it for a queue last seen paused. */
function candidatesUnlessPaused(store: Store, handle: PoolHandle, count: number, gate: Promise<boolean>): Promise<Candidate[]> {
  if (!seenPaused.get(store)?.has(handle.queue)) return takeCandidates(store, handle, count);
  return gate.then((paused) => (paused ? [] : takeCandidates(store, handle, count)));
}

/** Waits for both; on a failure of either, candidates taken meanwhile go back to the pool. */
async function settled(
  store: Store,
  handle: PoolHandle,
  gate: Promise<boolean>,
  prepared: Promise<Candidate[]>,
): Promise<[boolean, Candidate[]]> {
  const [pause, next] = await Promise.allSettled([gate, prepared]);
  if (pause.status === "fulfilled" && next.status === "fulfilled") return [pause.value, next.value];
  if (next.status === "fulfilled") giveBack(store, handle, next.value);
  throw pause.status === "rejected" ? pause.reason : (next as PromiseRejectedResult).reason;
}
