import type { Job } from "@switchyard/core";
import { type CloudqDocument, NATIVE, documentToJob } from "./document.js";
import { idOf, isDuplicateKey } from "./ids.js";
import { claimableFilter, reserveSort } from "./queries.js";
import { type Store, update } from "./store.js";

/** Candidates read beyond the number wanted, so reservers racing for the head of a queue rarely re-read. */
const CANDIDATE_SLACK = 20;
/** Candidates read per sorted find when they may be kept for later reserves. */
const CACHED_CANDIDATES = 200;
/** A bound on re-reads when every candidate went to another reserver; each round claims or sees fewer jobs. */
const MAX_ROUNDS = 200;
/** After losing a race, a reserver picks its next candidates at random among this many batches ahead. */
const RACE_WINDOW = 8;
/** A claim token older than this was left by a reserver that died mid-claim (a claim takes milliseconds). */
const STALE_TOKEN_MS = 30_000;

export interface ClaimRequest {
  worker: string;
  count: number;
  leaseMs: number;
}

type Candidate = Pick<CloudqDocument, "_id" | "switchyard">;

/**
 * Claims up to `count` jobs in reserve order. Candidates come from a sorted find (expired leases,
 * then priority, then FIFO; served by the `switchyard_reserve_*` index), then each is claimed by
 * ONE findOneAndUpdate whose filter is the whole claimable condition (queued and due, or reserved
 * with an expired lease), the candidate's `_id` and the attempt count it was read with. A
 * reserver that loses a candidate to another moves on to the next one.
 *
 * The sorted find reads more candidates than asked for, and what is left is kept for the next
 * reserve() on the same backend for `candidateTtlMs`, so the sort is paid once per batch of jobs
 * rather than once per job: that matters on servers that sort in memory (FerretDB). A candidate
 * is only a hint: the claim re-checks everything on the server.
 */
export async function claimJobs(store: Store, queue: string, request: ClaimRequest): Promise<Job[]> {
  const { stateField, claimTokens, candidateTtlMs } = store.layout;
  if (claimTokens) await sweepTokens(store);
  const claimed: Job[] = [];
  for (let round = 0; round < MAX_ROUNDS && claimed.length < request.count; round++) {
    let { candidates, until } = takeCached(store, queue);
    if (candidates.length === 0) {
      until = Date.now() + candidateTtlMs;
      candidates = await store.jobs
        .find(claimableFilter(queue, stateField, Date.now()), { projection: { _id: 1, "switchyard.attempts": 1 } })
        .sort(reserveSort(stateField))
        .limit(request.count - claimed.length + (candidateTtlMs > 0 ? CACHED_CANDIDATES : CANDIDATE_SLACK))
        .toArray();
      if (candidates.length === 0) break;
    }
    let next = 0;
    while (next < candidates.length && claimed.length < request.count) {
      const batch = candidates.slice(next, next + request.count - claimed.length);
      next += batch.length;
      const won = claimTokens ? await takeTokens(store, batch) : batch;
      // Another reserver is working down the same list. Strict order is moot between racing
      // reservers, so spread out over the next few candidates instead of colliding at every
      // step; only over the next few, since the oldest jobs are also the cheapest to reach for a
      // server that scans the collection in insertion order (FerretDB).
      if (won.length < batch.length) shuffleWindow(candidates, next, RACE_WINDOW * batch.length);
      for (const candidate of won) {
        const job = await claimOne(store, queue, candidate, request);
        if (job) claimed.push(job);
        else if (claimTokens) await store.claims.deleteOne({ _id: tokenOf(candidate) });
      }
    }
    if (next < candidates.length && until > Date.now()) keepCached(store, queue, { candidates: candidates.slice(next), until });
  }
  return claimed;
}

function shuffleWindow(items: Candidate[], start: number, width: number): void {
  for (let i = Math.min(items.length, start + width) - 1; i > start; i--) {
    const j = start + Math.floor(Math.random() * (i - start + 1));
    [items[i], items[j]] = [items[j] as Candidate, items[i] as Candidate];
  }
}

interface CachedCandidates {
  candidates: Candidate[];
  until: number;
}

const cache = new WeakMap<Store, Map<string, CachedCandidates>>();

/** Takes every unexpired cached candidate of the queue, so two local reserve() calls never share one. */
function takeCached(store: Store, queue: string): CachedCandidates {
  const entry = cache.get(store)?.get(queue);
  cache.get(store)?.delete(queue);
  return entry && entry.until > Date.now() ? entry : { candidates: [], until: 0 };
}

function keepCached(store: Store, queue: string, entry: CachedCandidates): void {
  let byQueue = cache.get(store);
  if (!byQueue) {
    byQueue = new Map();
    cache.set(store, byQueue);
  }
  byQueue.set(queue, entry);
}

/** A job this backend made runnable may come before the cached candidates; the next reserve() reads afresh. */
export function forgetCandidates(store: Store, queue: string): void {
  cache.get(store)?.delete(queue);
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
