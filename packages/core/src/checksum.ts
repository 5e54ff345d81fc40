import * as crypto from "node:crypto";
import type { Backend, Page } from "./backend.js";
import { JOB_STATES, type Job, type JobState, type Json } from "./job.js";
import { SeenIds } from "./seen-ids.js";

/*
 * An order-independent checksum of a queue: what a migration must keep of every job (id, name, data,
 * state, priority, attempts, due time), hashed per job and summed, so two stores that list their
 * jobs in different orders compare equal when they hold the same jobs.
 */

const MASK = (1n << 64n) - 1n;

/** JSON with object keys sorted, so equal data hashes equally whichever order a store keeps keys in. */
function canonical(value: Json): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonical(value[key] as Json)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The state a job has after a migration: an active job's lease stays with the old store, so it arrives waiting. */
export function migratedState(job: Pick<Job, "state">): JobState {
  return job.state === "active" ? "waiting" : job.state;
}

export type KeptFields = Pick<Job, "id" | "name" | "data" | "state" | "priority" | "attempts" | "runAt">;

/**
 * The fields a migration keeps, as one string: two jobs agree on them when their fingerprints are
 * equal. A migration compares these directly (no hashing); jobDigest hashes it for checksums.
 */
export function jobFingerprint(job: KeptFields): string {
  const state = migratedState(job);
  return JSON.stringify([job.id, job.name, canonical(job.data), state, job.priority, job.attempts, state === "delayed" ? job.runAt : null]);
}

/** What a job was given (id, name, data, priority), without what a worker changes (state, attempts, due time). */
export function contentFingerprint(job: Pick<Job, "id" | "name" | "data" | "priority">): string {
  return JSON.stringify([job.id, job.name, canonical(job.data), job.priority]);
}

/**
 * 64 bits of SHA-256 over a fingerprint (jobFingerprint, contentFingerprint). crypto.hash (Node
 * 20.12 and later) hashes a short text about three times faster than a Hash object, which a
 * migration makes for every job; older Node 20 releases take the Hash object.
 */
export const fingerprintDigest: (text: string) => bigint =
  typeof crypto.hash === "function"
    ? (text) => BigInt(`0x${crypto.hash("sha256", text, "hex").slice(0, 16)}`)
    : (text) => crypto.createHash("sha256").update(text).digest().readBigUInt64BE(0);

/** 64 bits of SHA-256 over the fields a migration keeps (jobFingerprint). */
export function jobDigest(job: KeptFields): bigint {
  return fingerprintDigest(jobFingerprint(job));
}

/** 64 bits of SHA-256 over contentFingerprint: for a job a target's worker took the moment it arrived. */
export function contentDigest(job: Pick<Job, "id" | "name" | "data" | "priority">): bigint {
  return fingerprintDigest(contentFingerprint(job));
}

export interface StateChecksum {
  jobs: number;
  /** The sum of the jobs' digests mod 2^64, in hex. */
  checksum: string;
}

export type QueueChecksum = Record<JobState, StateChecksum>;

/**
 * Sums job digests per state as pages of jobs come (each job once: see forEachPage), from nothing or
 * from a checksum summed before (a resumed migration's).
 */
export class ChecksumAccumulator {
  readonly #sums = new Map<JobState, { jobs: number; sum: bigint }>();

  constructor(before?: QueueChecksum) {
    for (const state of before ? JOB_STATES : []) {
      const saved = before?.[state];
      if (saved && saved.jobs > 0) this.#sums.set(state, { jobs: saved.jobs, sum: BigInt(`0x${saved.checksum}`) });
    }
  }

  add(jobs: readonly KeptFields[]): void {
    for (const job of jobs) this.addDigest(migratedState(job), jobDigest(job));
  }

  /** One job by its digest (jobDigest), for a caller that has its fingerprint already. */
  addDigest(state: JobState, digest: bigint): void {
    const entry = this.#sums.get(state) ?? { jobs: 0, sum: 0n };
    entry.jobs++;
    entry.sum = (entry.sum + digest) & MASK;
    this.#sums.set(state, entry);
  }

  result(): QueueChecksum {
    const out = {} as QueueChecksum;
    for (const state of JOB_STATES) {
      const entry = this.#sums.get(state) ?? { jobs: 0, sum: 0n };
      out[state] = { jobs: entry.jobs, checksum: entry.sum.toString(16).padStart(16, "0") };
    }
    return out;
  }
}

/**
 * Every job of a queue, page by page, handed to `each` once. Only an export whose pages say they
 * may repeat a job (glide-mq's SCAN-based one, while the keyspace grows) costs a record of the ids
 * seen (SeenIds: a bit per numeric id), so reading takes about the same memory whatever the queue's size.
 */
export async function forEachPage(backend: Backend, queue: string, each: (jobs: Job[]) => void, limit = 1000): Promise<void> {
  let cursor: string | null = null;
  let seen: SeenIds | null = null;
  do {
    const page: Page<Job> = await backend.export(queue, cursor === null ? { limit } : { limit, cursor });
    if (page.mayRepeat) seen ??= new SeenIds();
    const known = seen;
    each(known === null ? page.items : page.items.filter((job) => known.add(job.id)));
    cursor = page.cursor;
  } while (cursor !== null);
}

/** The queue's checksum per state, over the jobs `keep` picks (all by default). */
export async function queueChecksum(backend: Backend, queue: string, keep: (job: Job) => boolean = () => true): Promise<QueueChecksum> {
  const accumulator = new ChecksumAccumulator();
  await forEachPage(backend, queue, (jobs) => accumulator.add(jobs.filter(keep)));
  return accumulator.result();
}

/** Source and target checksums side by side, per state that either has jobs in, and whether all agree. */
export function compareChecksums(source: QueueChecksum, target: QueueChecksum): Pick<VerificationReport, "states" | "equal"> {
  const states: VerificationReport["states"] = {};
  let equal = true;
  for (const state of JOB_STATES) {
    const pair = { source: source[state], target: target[state] };
    if (pair.source.jobs > 0 || pair.target.jobs > 0) states[state] = pair;
    if (pair.source.jobs !== pair.target.jobs || pair.source.checksum !== pair.target.checksum) equal = false;
  }
  return { states, equal };
}

export interface VerifyOptions {
  queue: string;
  /** The queue's name in the target; `queue` by default. */
  targetQueue?: string;
  /** Only jobs that were in these states in the source (a migration with `states`); all by default. */
  states?: readonly JobState[];
  /** At most this many differing ids are listed; default 1,000. */
  maxIds?: number;
}

export interface VerificationReport {
  queue: string;
  targetQueue: string;
  /** Per state: jobs and checksum in the source and in the target. */
  states: Partial<Record<JobState, { source: StateChecksum; target: StateChecksum }>>;
  equal: boolean;
  /** Ids whose job differs, or is in one store only (at most `maxIds`); empty when equal. */
  differing: string[];
  /**
   * Whether both queues were read to compare them (verifyQueue); false when a migration's own
   * checksums, of the jobs it sent and of the same jobs as the target answered them, agreed (verifyMigration).
   */
  readAgain: boolean;
}

/**
 * Compares a queue in two stores by checksum per state; when they disagree, a second pass over both
 * finds the ids that differ (the source's digests held by id, so only then does memory grow with the
 * queue). The target queue is expected to hold the migrated jobs only.
 */
export async function verifyQueue(from: Backend, to: Backend, options: VerifyOptions): Promise<VerificationReport> {
  const { queue, targetQueue = queue, maxIds = 1000 } = options;
  const wanted = options.states ? new Set<JobState>(options.states) : null;
  const inSource = (job: Job) => wanted === null || wanted.has(job.state);
  // An active job arrives waiting: with active among the states, waiting target jobs are in too.
  const inTarget = (job: Job) => wanted === null || wanted.has(job.state) || (job.state === "waiting" && wanted.has("active"));
  const [source, target] = await Promise.all([queueChecksum(from, queue, inSource), queueChecksum(to, targetQueue, inTarget)]);
  const { states, equal } = compareChecksums(source, target);
  if (equal) return { queue, targetQueue, states, equal, differing: [], readAgain: true };
  const digests = new Map<string, bigint>();
  await forEachPage(from, queue, (jobs) => {
    for (const job of jobs.filter(inSource)) digests.set(job.id, jobDigest(job));
  });
  const differing = new Set<string>();
  await forEachPage(to, targetQueue, (jobs) => {
    for (const job of jobs.filter(inTarget)) {
      if (digests.get(job.id) !== jobDigest(job)) differing.add(job.id);
      digests.delete(job.id);
    }
  });
  for (const id of digests.keys()) differing.add(id);
  return { queue, targetQueue, states, equal, differing: [...differing].slice(0, maxIds), readAgain: true };
}
