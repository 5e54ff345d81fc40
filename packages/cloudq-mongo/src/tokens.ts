import { isDuplicateKey } from "./ids.js";
import { idOf } from "./ids.js";
import type { Store } from "./store.js";

/**
 * Claim tokens, when `claimTokens` is on: before its claim, a reserver inserts
 * `{_id: "<job _id>:<attempt>", at}` into the claims collection. Only one reserver can insert a
 * given token (the `_id` index is unique on every server), so only one is ever inside the claim
 * for that attempt of that job. That keeps a job from being handed out twice on servers whose
 * findAndModify and update read and then write in two steps (FerretDB 1.x does); on MongoDB,
 * whose updates are atomic by themselves, it is an extra guard that may be turned off.
 *
 * A backend may take the tokens of a few candidates ahead of the reserves that will claim them
 * (candidates.ts) and holds each for at most MAX_HOLD_MS, well inside STALE_TOKEN_MS: a token is
 * never used once a sweeper (of any process) could have removed it. After a successful claim the
 * token is left in place (the job's attempt count has moved past it, so it can never block
 * anyone); after a failed one, or once its hold is over, it is removed. Tokens are swept once
 * they are STALE_TOKEN_MS old, which also clears those of a reserver that died holding them.
 * Token times are the wall clock (Date.now()), never the backend's `clock` option.
 */
export const STALE_TOKEN_MS = 30_000;
/** How long a backend may hold a token before it claims with it; unused ones are then given back. */
export const MAX_HOLD_MS = 5_000;

export function tokenOf(document: { _id: unknown; switchyard?: { attempts?: number } }): string {
  return `${idOf({ _id: document._id })}:${(document.switchyard?.attempts ?? 0) + 1}`;
}

/** Inserts the tokens of these candidates in one unordered insertMany; answers those won. */
export async function takeTokens<
  T extends { doc: { _id: unknown; switchyard?: { attempts?: number } }; token?: { id: string; since: number } },
>(store: Store, candidates: T[]): Promise<Set<T>> {
  if (candidates.length === 0) return new Set();
  await sweepTokens(store);
  const since = Date.now();
  const at = new Date(since);
  const ids = candidates.map((candidate) => tokenOf(candidate.doc));
  let lost = new Set<number>();
  try {
    await store.claims.insertMany(
      ids.map((_id) => ({ _id, at })),
      { ordered: false },
    );
  } catch (error) {
    lost = new Set(duplicateIndexes(error));
  }
  const won = new Set<T>();
  candidates.forEach((candidate, index) => {
    if (lost.has(index)) return;
    candidate.token = { id: ids[index] as string, since };
    won.add(candidate);
  });
  return won;
}

/**
 * Takes one token by itself, as recurring.ts guards its compare-and-set; false when another holds
 * it. The caller gives it back (releaseTokens) once its write is done.
 */
export async function takeToken(store: Store, id: string): Promise<boolean> {
  await sweepTokens(store);
  try {
    await store.claims.insertOne({ _id: id, at: new Date() });
    return true;
  } catch (error) {
    if (isDuplicateKey(error)) return false;
    throw error;
  }
}

/**
 * Gives tokens back. In the background unless `wait` (a failed claim, close()): a token that
 * fails to go is swept later, and meanwhile only keeps other reservers off that attempt.
 */
export function releaseTokens(store: Store, ids: string[], options: { wait?: boolean } = {}): Promise<void> {
  const done = (ids.length === 1 ? store.claims.deleteOne({ _id: ids[0] as string }) : store.claims.deleteMany({ _id: { $in: ids } })).then(
    () => undefined,
  );
  if (options.wait) return done;
  done.catch(() => undefined);
  return Promise.resolve();
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
