import { type CloudqDocument, NATIVE } from "./document.js";
import { claimableByState, claimableFilter, reserveSort } from "./queries.js";
import type { Store } from "./store.js";
import { MAX_HOLD_MS, releaseTokens, takeTokens, tokenOf } from "./tokens.js";

/**
 * Where reserve() gets the jobs it claims: one sorted find in reserve order (expired leases, then
 * priority, then FIFO; served by the `switchyard_reserve_*` index) that reads whole documents, so
 * that a claimed job is answered from its candidate document plus the claim's own changes, with no
 * read-back. A candidate is only a hint: the claim re-checks everything on the server.
 *
 * With `candidateTtlMs` (0 by default) the candidates of one find form a pool that serves every
 * reserve() of this backend on the queue for that long, so the sort is paid once per batch of jobs
 * rather than once per job (it matters on servers that sort in memory, FerretDB), and the claim
 * tokens (tokens.ts) are taken for a few candidates at once, ahead of the reserves that use them:
 * a reserve() that finds a candidate whose token this backend already holds claims it with one
 * write. With 0 every reserve() reads its own candidates and takes exactly the tokens it needs.
 */
export interface Candidate {
  doc: CloudqDocument;
  /** The claim token this backend holds for the candidate's next attempt, and since when (Date.now()). */
  token?: { id: string; since: number };
}

interface Pool {
  queue: string;
  list: Candidate[];
  /** Until when (Date.now()) `list` may serve reserves. */
  until: number;
  /** How many tokens the next insert takes: doubles while they all get used, back to 1 when some expire unused. */
  batch: number;
  /** The find or token insert in flight, which concurrent reserves wait for instead of racing it; true when a find came back empty. */
  busy?: Promise<boolean>;
  /** Reserves working from the pool; it is dropped from the map only when none is and it is empty. */
  users: number;
  timer?: ReturnType<typeof setTimeout>;
}

/** Candidates read beyond the number wanted, so reservers racing for the head of a queue rarely re-read. */
const CANDIDATE_SLACK = 20;
/** Candidates read per sorted find when they may be kept for later reserves. */
const POOLED_CANDIDATES = 200;
/** After losing a race, a reserver picks its next candidates at random among this many batches ahead. */
const RACE_WINDOW = 8;
/** At most this many tokens are taken ahead of the reserves that will use them. */
const MAX_TOKEN_BATCH = 16;
/** For this long after a lost token race, a reserve spreads out from its first token insert on. */
const RACE_MEMORY_MS = 1_000;
/** At most this many more candidates a private pool reads to pass by those this backend's other reserves went for. */
const MAX_PASSED_BY = 200;
/** A bound on finds and token inserts per reserve when every candidate goes to another reserver. */
const MAX_ROUNDS = 200;

const pools = new WeakMap<Store, Map<string, Pool>>();

function freshPool(queue: string, until: number): Pool {
  return { queue, list: [], until, batch: 1, users: 0 };
}

/** The candidates one reserve works from: the queue's shared pool (candidateTtlMs > 0), or its own. */
export interface PoolHandle {
  queue: string;
  pool: Pool;
  /** A private pool's candidates (by token id) it went for, which this backend's other reserves pass by until it is closed. */
  inHand?: Set<string>;
}

/**
 * The candidates (by token id) that the private pools of this backend's reserves are taking tokens
 * for or hold. Concurrent reserves of one backend read the same head of the queue; each passes by
 * what another already went for, rather than racing it for the token and losing (50 reserves of
 * one gateway on FerretDB inserted 22 tokens per job claimed). Tokens still decide between backends.
 */
const goneFor = new WeakMap<Store, Set<string>>();

function goneForBy(store: Store): Set<string> {
  let ids = goneFor.get(store);
  if (!ids) {
    ids = new Set();
    goneFor.set(store, ids);
  }
  return ids;
}

export function openPool(store: Store, queue: string): PoolHandle {
  if (store.layout.candidateTtlMs <= 0) return { queue, pool: freshPool(queue, Number.POSITIVE_INFINITY), inHand: new Set() };
  let byQueue = pools.get(store);
  if (!byQueue) {
    byQueue = new Map();
    pools.set(store, byQueue);
  }
  let pool = byQueue.get(queue);
  if (!pool) {
    pool = freshPool(queue, 0);
    byQueue.set(queue, pool);
  }
  pool.users++;
  return { queue, pool };
}

/** A reserve is done with its pool: a private one gives back the tokens it still holds; an empty shared one is dropped. */
export function closePool(store: Store, handle: PoolHandle): void {
  const { queue, pool } = handle;
  if (store.layout.candidateTtlMs <= 0) {
    releaseHeld(store, pool.list);
    const ids = goneForBy(store);
    for (const id of handle.inHand ?? []) ids.delete(id);
    return;
  }
  pool.users--;
  if (pool.users === 0 && pool.list.length === 0 && !pool.busy && !pool.timer) pools.get(store)?.delete(queue);
}

/**
 * Takes up to `wanted` candidates off the pool, in reserve order, each with its claim token held
 * (with `claimTokens` off, none is needed). Reads candidates and takes tokens as needed, and
 * answers as soon as it has any: a token is used right after it is won, never held while more are
 * sought. An empty answer means the queue has nothing claimable (as far as a fresh find saw).
 */
export async function takeCandidates(store: Store, handle: PoolHandle, wanted: number): Promise<Candidate[]> {
  const { queue, pool } = handle;
  const taken: Candidate[] = [];
  for (let round = 0; round < MAX_ROUNDS && taken.length === 0; ) {
    dropExpired(store, pool);
    while (taken.length < wanted && pool.list[0] && ready(store, pool.list[0])) taken.push(pool.list.shift() as Candidate);
    if (taken.length > 0) break;
    // A find or token insert of another reserve is in flight: use what it brings rather than race it.
    if (pool.busy) {
      if ((await pool.busy) && pool.list.length === 0) break;
      continue;
    }
    round++;
    const step = pool.list.length === 0 ? refill(store, handle, wanted) : takeAhead(store, handle, wanted);
    pool.busy = step.finally(() => {
      pool.busy = undefined;
    });
    if ((await pool.busy) && pool.list.length === 0) break;
  }
  return taken;
}

/** Whether a held token may still be used: young enough that no sweeper can have removed it. */
export function tokenUsable(store: Store, candidate: Candidate): boolean {
  return ready(store, candidate);
}

/**
 * Puts candidates taken but not claimed (the queue turned out paused, the completion was refused)
 * back at the head of the pool, tokens and all; a private pool gives them back when it is closed.
 */
export function giveBack(store: Store, handle: PoolHandle, candidates: Candidate[]): void {
  if (candidates.length === 0) return;
  handle.pool.list.unshift(...candidates);
  if (store.layout.candidateTtlMs > 0) armExpiry(store, handle.pool);
}

/** Token-holding candidates of a private pool are released when its reserve is done with them. */
export function releaseHeld(store: Store, candidates: Candidate[]): void {
  const ids = candidates.flatMap((candidate) => (candidate.token ? [candidate.token.id] : []));
  if (ids.length > 0) releaseTokens(store, ids);
}

/** A candidate is ready when its token is held and young enough to be used (or when tokens are off). */
function ready(store: Store, candidate: Candidate): boolean {
  if (!store.layout.claimTokens) return true;
  return candidate.token !== undefined && Date.now() - candidate.token.since < MAX_HOLD_MS;
}

/**
 * Reads the pool's candidates, whole documents in reserve order; true when it found nothing. A private pool
 * reads past the candidates this backend's other reserves went for, and keeps none of them: true
 * as well when those are all it found (they are being claimed).
 */
async function refill(store: Store, handle: PoolHandle, wanted: number): Promise<boolean> {
  const { queue, pool, inHand } = handle;
  const { candidateTtlMs } = store.layout;
  const passedBy = inHand ? goneForBy(store) : undefined;
  const limit = wanted + (candidateTtlMs > 0 ? POOLED_CANDIDATES : CANDIDATE_SLACK + Math.min(passedBy?.size ?? 0, MAX_PASSED_BY));
  const until = candidateTtlMs > 0 ? Date.now() + candidateTtlMs : Number.POSITIVE_INFINITY;
  const documents = await sortedCandidates(store, queue, limit);
  pool.list = documents.filter((doc) => !passedBy?.has(tokenOf(doc))).map((doc) => ({ doc }));
  pool.until = until;
  return pool.list.length === 0;
}

/** Up to `limit` claimable documents of the queue in reserve order, by one sorted find (or one per state, ServerTraits). */
async function sortedCandidates(store: Store, queue: string, limit: number): Promise<CloudqDocument[]> {
  const { stateField } = store.layout;
  const now = store.now();
  const read = (filter: Record<string, unknown>) =>
    store.jobs.find(filter).sort(reserveSort(stateField)).limit(limit).batchSize(limit).toArray();
  if (!store.server.equalitiesOnly) return read(claimableFilter(queue, stateField, now));
  const [expired, due] = await Promise.all(claimableByState(queue, stateField, now).map(read));
  return [...(expired ?? []), ...(due ?? [])].slice(0, limit);
}

/**
 * Takes the tokens of the next candidates in one insert: as many as this reserve needs, or, on a
 * shared pool, as many as `batch` says the backend's reserves have been using. Candidates whose
 * token another reserver holds are dropped, and the rest are spread out after such a race.
 */
async function takeAhead(store: Store, handle: PoolHandle, needed: number): Promise<boolean> {
  const { queue, pool, inHand } = handle;
  const shared = store.layout.candidateTtlMs > 0;
  const count = shared ? Math.max(needed, pool.batch) : needed;
  if (inHand) {
    // Another reserve of this backend may have gone for some since this pool was read.
    const passedBy = goneForBy(store);
    pool.list = pool.list.filter((candidate) => candidate.token || !passedBy.has(tokenOf(candidate.doc)));
  }
  const start = pool.list.findIndex((candidate) => candidate.token === undefined);
  if (start < 0) return false;
  // Other reservers took the head lately: they are likely still at it, so spread out at once.
  if (racedLately(store, queue)) spreadAfterLostRace(pool.list, start, count);
  const batch = pool.list.slice(start, start + count);
  if (inHand) markGoneFor(store, inHand, batch);
  const won = await takeTokens(store, batch);
  // The pool ran out or was forgotten while the insert ran: what it won is given back at once.
  const pooled = new Set(pool.list);
  const orphaned = [...won].filter((candidate) => !pooled.has(candidate));
  if (orphaned.length > 0) {
    releaseHeld(store, orphaned);
    return false;
  }
  const lost = new Set(batch.filter((candidate) => !won.has(candidate)));
  if (lost.size > 0) {
    noteLostRace(store, queue);
    pool.list = pool.list.filter((candidate) => !lost.has(candidate));
    spreadAfterLostRace(pool.list, start + won.size, batch.length);
  }
  if (shared) {
    pool.batch = Math.min(MAX_TOKEN_BATCH, pool.batch * 2);
    armExpiry(store, pool);
  }
  return false;
}

/** Notes the candidates a private pool goes for, until it is closed (closePool). */
function markGoneFor(store: Store, inHand: Set<string>, candidates: Candidate[]): void {
  const ids = goneForBy(store);
  for (const candidate of candidates) {
    const id = tokenOf(candidate.doc);
    ids.add(id);
    inHand.add(id);
  }
}

const lostRaces = new WeakMap<Store, Map<string, number>>();

function noteLostRace(store: Store, queue: string): void {
  let byQueue = lostRaces.get(store);
  if (!byQueue) {
    byQueue = new Map();
    lostRaces.set(store, byQueue);
  }
  if (byQueue.size > 1000) byQueue.clear();
  byQueue.set(queue, Date.now());
}

function racedLately(store: Store, queue: string): boolean {
  return Date.now() - (lostRaces.get(store)?.get(queue) ?? 0) < RACE_MEMORY_MS;
}

/** A pool past its time (or past its tokens' hold) gives up what it holds. */
function dropExpired(store: Store, pool: Pool): void {
  const now = Date.now();
  if (pool.until <= now) {
    releaseHeld(store, pool.list);
    pool.list = [];
    return;
  }
  if (!store.layout.claimTokens) return;
  const stale = pool.list.filter((candidate) => candidate.token && now - candidate.token.since >= MAX_HOLD_MS);
  if (stale.length === 0) return;
  releaseHeld(store, stale);
  const dropped = new Set(stale);
  pool.list = pool.list.filter((candidate) => !dropped.has(candidate));
  pool.batch = 1;
}

/**
 * While a shared pool holds tokens, a timer gives back those left unused once the pool or their
 * hold runs out, so an idle backend keeps no one else from those jobs.
 */
function armExpiry(store: Store, pool: Pool): void {
  if (pool.timer || !store.layout.claimTokens) return;
  const held = pool.list.filter((candidate) => candidate.token);
  if (held.length === 0) return;
  const first = Math.min(...held.map((candidate) => (candidate.token as { since: number }).since));
  pool.timer = setTimeout(
    () => {
      pool.timer = undefined;
      if (!pool.busy) dropExpired(store, pool);
      armExpiry(store, pool);
      const byQueue = pools.get(store);
      if (pool.users === 0 && pool.list.length === 0 && !pool.busy && byQueue?.get(pool.queue) === pool) byQueue.delete(pool.queue);
    },
    Math.max(0, Math.min(pool.until, first + MAX_HOLD_MS) - Date.now()) + 5,
  );
  pool.timer.unref?.();
}

/** What forgetCandidates() needs to know of a job this backend just enqueued. */
export interface AddedJob {
  /** Waiting now (not delayed, not blocked). */
  runnable: boolean;
  priority: number;
  createdAt: number;
}

/**
 * A job this backend made runnable may come before the pooled candidates: the next reserve() reads
 * afresh, and the tokens held are given back. New waiting jobs that sort after every pooled
 * candidate (the usual FIFO enqueue) change nothing: the pool is the head of the queue either way.
 */
export function forgetCandidates(store: Store, queue: string, added?: AddedJob[]): void {
  const pool = pools.get(store)?.get(queue);
  if (!pool) return;
  const last = pool.list[pool.list.length - 1]?.doc;
  if (added && last && added.every((job) => !runnableBefore(store, job, last))) return;
  releaseHeld(store, pool.list);
  pool.list = [];
  pool.until = 0;
}

/** Gives back every token this backend holds (close()). */
export async function releaseAll(store: Store): Promise<void> {
  const byQueue = pools.get(store);
  if (!byQueue) return;
  const held: Candidate[] = [];
  for (const pool of byQueue.values()) {
    if (pool.timer) clearTimeout(pool.timer);
    held.push(...pool.list);
  }
  pools.delete(store);
  const ids = held.flatMap((candidate) => (candidate.token ? [candidate.token.id] : []));
  if (ids.length > 0) await releaseTokens(store, ids, { wait: true });
}

/** Whether a new job sorts before `last` in reserve order (reserveSort): expired leases, priority, then FIFO. */
function runnableBefore(store: Store, job: AddedJob, last: CloudqDocument): boolean {
  if (!job.runnable) return false;
  // Expired leases sort before every queued job.
  if (last[store.layout.stateField] !== NATIVE.queued) return false;
  const priority = last.switchyard?.boost ?? -(last.switchyard?.demote ?? 0);
  if (job.priority !== priority) return job.priority > priority;
  return last.inserted_at instanceof Date && job.createdAt <= last.inserted_at.getTime();
}

/**
 * Another reserver is working down the same list. Strict order is moot between racing reservers,
 * so spread out over the next few candidates instead of colliding at every step; only over the
 * next few, since the oldest jobs are also the cheapest to reach for a server that scans the
 * collection in insertion order (FerretDB).
 */
export function spreadAfterLostRace<T>(list: T[], start: number, batchSize: number): void {
  const end = Math.min(list.length, start + RACE_WINDOW * batchSize);
  for (let i = end - 1; i > start; i--) {
    const j = start + Math.floor(Math.random() * (i - start + 1));
    [list[i], list[j]] = [list[j] as T, list[i] as T];
  }
}
