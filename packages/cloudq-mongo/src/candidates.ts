import type { CloudqDocument } from "./document.js";
import { claimableFilter, reserveSort } from "./queries.js";
import type { Store } from "./store.js";

/**
 * Where reserve() gets the jobs it tries to claim: one sorted find in reserve order (expired
 * leases, then priority, then FIFO; served by the `switchyard_reserve_*` index). A candidate is
 * only a hint: the claim re-checks everything on the server.
 *
 * With `candidateTtlMs` (0 by default) one find reads extra candidates and what a reserve() leaves
 * is kept for the next ones on the same backend for that long, so the sort is paid once per batch
 * of jobs rather than once per job: that matters on servers that sort in memory (FerretDB).
 */
export type Candidate = Pick<CloudqDocument, "_id" | "switchyard">;

export interface Candidates {
  list: Candidate[];
  /** Until when what is left of `list` may serve a later reserve() (only with candidateTtlMs). */
  until: number;
}

/** Candidates read beyond the number wanted, so reservers racing for the head of a queue rarely re-read. */
const CANDIDATE_SLACK = 20;
/** Candidates read per sorted find when they may be kept for later reserves. */
const CACHED_CANDIDATES = 200;
/** After losing a race, a reserver picks its next candidates at random among this many batches ahead. */
const RACE_WINDOW = 8;

export async function readCandidates(store: Store, queue: string, wanted: number): Promise<Candidates> {
  const cached = takeCached(store, queue);
  if (cached.list.length > 0) return cached;
  const { stateField, candidateTtlMs } = store.layout;
  const until = Date.now() + candidateTtlMs;
  const list = await store.jobs
    .find(claimableFilter(queue, stateField, Date.now()), { projection: { _id: 1, "switchyard.attempts": 1 } })
    .sort(reserveSort(stateField))
    .limit(wanted + (candidateTtlMs > 0 ? CACHED_CANDIDATES : CANDIDATE_SLACK))
    .toArray();
  return { list, until };
}

/** Keeps the candidates from `next` on for later reserves while they may still serve. */
export function keepUnused(store: Store, queue: string, candidates: Candidates, next: number): void {
  if (next >= candidates.list.length || candidates.until <= Date.now()) return;
  let byQueue = cache.get(store);
  if (!byQueue) {
    byQueue = new Map();
    cache.set(store, byQueue);
  }
  byQueue.set(queue, { list: candidates.list.slice(next), until: candidates.until });
}

/** A job this backend made runnable may come before the cached candidates; the next reserve() reads afresh. */
export function forgetCandidates(store: Store, queue: string): void {
  cache.get(store)?.delete(queue);
}

/**
 * Another reserver is working down the same list. Strict order is moot between racing reservers,
 * so spread out over the next few candidates instead of colliding at every step; only over the
 * next few, since the oldest jobs are also the cheapest to reach for a server that scans the
 * collection in insertion order (FerretDB).
 */
export function spreadAfterLostRace(list: Candidate[], start: number, batchSize: number): void {
  const end = Math.min(list.length, start + RACE_WINDOW * batchSize);
  for (let i = end - 1; i > start; i--) {
    const j = start + Math.floor(Math.random() * (i - start + 1));
    [list[i], list[j]] = [list[j] as Candidate, list[i] as Candidate];
  }
}

const cache = new WeakMap<Store, Map<string, Candidates>>();

/** Takes every unexpired cached candidate of the queue, so two local reserve() calls never share one. */
function takeCached(store: Store, queue: string): Candidates {
  const entry = cache.get(store)?.get(queue);
  cache.get(store)?.delete(queue);
  return entry && entry.until > Date.now() ? entry : { list: [], until: 0 };
}
