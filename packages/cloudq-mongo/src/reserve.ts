import type { Job } from "@switchyard/core";
import { type Candidate, keepUnused, readCandidates, spreadAfterLostRace } from "./candidates.js";
import { NATIVE, documentToJob } from "./document.js";
import { idOf, isDuplicateKey } from "./ids.js";
import { claimableFilter } from "./queries.js";
import { type Store, update } from "./store.js";

/** A bound on re-reads when every candidate went to another reserver; each round claims or sees fewer jobs. */
const MAX_ROUNDS = 200;
/** A claim token older than this was left by a reserver that died mid-claim (a claim takes milliseconds). */
const STALE_TOKEN_MS = 30_000;

export interface ClaimRequest {
  worker: string;
  count: number;
  leaseMs: number;
}

/**
 * Claims up to `count` jobs in reserve order. Candidates come from a sorted find (candidates.ts),
 * then each is claimed by ONE findOneAndUpdate whose filter is the whole claimable condition
 * (queued and due, or reserved with an expired lease), the candidate's `_id` and the attempt count
 * it was read with. A reserver that loses a candidate to another moves on to the next one.
 */
export async function claimJobs(store: Store, queue: string, request: ClaimRequest): Promise<Job[]> {
  const { claimTokens } = store.layout;
  if (claimTokens) await sweepTokens(store);
  const claimed: Job[] = [];
  for (let round = 0; round < MAX_ROUNDS && claimed.length < request.count; round++) {
    const candidates = await readCandidates(store, queue, request.count - claimed.length);
    const { list } = candidates;
    if (list.length === 0) break;
    let next = 0;
    while (next < list.length && claimed.length < request.count) {
      const batch = list.slice(next, next + request.count - claimed.length);
      next += batch.length;
      const won = claimTokens ? await takeTokens(store, batch) : batch;
      if (won.length < batch.length) spreadAfterLostRace(list, next, batch.length);
      for (const candidate of won) {
        const job = await claimOne(store, queue, candidate, request);
        if (job) claimed.push(job);
        else if (claimTokens) await store.claims.deleteOne({ _id: tokenOf(candidate) });
      }
    }
    keepUnused(store, queue, candidates, next);
  }
  return claimed;
}

/**
 * Claim tokens, when `claimTokens` is on: before its findOneAndUpdate, a reserver inserts
 * `{_id: "<job _id>:<attempt>"}` into the claims collection. Only one reserver can insert a given
 * token (the `_id` index is unique on every server), so only one is ever inside the
 * findOneAndUpdate for that attempt of that job. That keeps a job from being handed out twice on
 * servers whose findAndModify reads and then writes in two steps (FerretDB 1.x does); on MongoDB,
 * whose findOneAndUpdate is atomic by itself, it is an extra guard that may be turned off.
 *
 * After a successful claim the token is left in place (the job's attempt count has moved past
 * it, so it can never block anyone); after a failed one it is removed. Tokens are swept once they
 * are STALE_TOKEN_MS old, which also clears one left by a reserver that died mid-claim.
 */
function tokenOf(candidate: Candidate): string {
  return `${idOf({ _id: candidate._id })}:${(candidate.switchyard?.attempts ?? 0) + 1}`;
}

/** Inserts the batch's tokens in one unordered insertMany and returns the candidates whose token it won. */
async function takeTokens(store: Store, batch: Candidate[]): Promise<Candidate[]> {
  const at = new Date();
  try {
    await store.claims.insertMany(
      batch.map((candidate) => ({ _id: tokenOf(candidate), at })),
      { ordered: false },
    );
    return batch;
  } catch (error) {
    const lost = new Set(duplicateIndexes(error));
    return batch.filter((_, index) => !lost.has(index));
  }
}

/** The positions of a bulk insert that hit a unique index; any other failure is rethrown. */
function duplicateIndexes(error: unknown): number[] {
  const writeErrors = (error as { writeErrors?: unknown }).writeErrors;
  const list = Array.isArray(writeErrors) ? writeErrors : writeErrors ? [writeErrors] : [];
  if (list.length === 0 || list.some((entry) => !isDuplicateKey(entry))) throw error;
  return list.map((entry) => (entry as { index: number }).index);
}

const lastSweep = new WeakMap<Store, number>();

async function sweepTokens(store: Store): Promise<void> {
  const now = Date.now();
  if (now - (lastSweep.get(store) ?? 0) < STALE_TOKEN_MS / 2) return;
  lastSweep.set(store, now);
  await store.claims.deleteMany({ at: { $lt: new Date(now - STALE_TOKEN_MS) } });
}

/**
 * ONE atomic findOneAndUpdate per job: its filter is the whole claimable condition (queued and
 * due, or reserved with an expired lease) plus the candidate's `_id` and the attempt count it was
 * read with, so the server re-checks everything as it marks the document, whatever any other
 * reserver (Switchyard or a legacy server) did since the candidate was read.
 */
async function claimOne(store: Store, queue: string, candidate: Candidate, request: ClaimRequest): Promise<Job | null> {
  const { stateField } = store.layout;
  const now = Date.now();
  const document = await store.jobs.findOneAndUpdate(
    { ...claimableFilter(queue, stateField, now), _id: candidate._id, "switchyard.attempts": candidate.switchyard?.attempts ?? null },
    update({
      $set: {
        [stateField]: NATIVE.reserved,
        updated_at: new Date(now),
        "switchyard.lease": { worker: request.worker, expiresAt: now + request.leaseMs },
        "switchyard.startedAt": now,
      },
      $inc: { "switchyard.attempts": 1 },
      $unset: { "switchyard.runAt": "" },
    }),
    { returnDocument: "after" },
  );
  return document ? documentToJob(document, stateField, now) : null;
}
