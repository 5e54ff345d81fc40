import type { Backend, Job } from "@switchyard/core";
import { keyOf, moveEntry, perBackend, setNewest } from "./qless-state.js";

/** A history entry as qless shows it: when (whole seconds), what happened, and its details (`q`, `worker`, `group`). */
export interface QlessHistoryEntry {
  when: number;
  what: string;
  [detail: string]: unknown;
}

/** Where a job stands, coarsely: a kept history is shown only while the job still stands where the doors left it. */
type Standing = { state: "pending" | "active" | "completed" | "failed" | "canceled"; attempts: number | null };

/** Fields of qless's job hash that qless leaves stale and a store's state cannot show (see QlessHistory.stale). */
export type StaleFields = Partial<{ state: string; worker: string; expires: number }>;

interface KeptHistory {
  entries: QlessHistoryEntry[];
  after: Standing;
  stale?: { fields: StaleFields; after: Standing; lease: number | null };
  /** The client's own text of the job's data at its last put, when it differs from JSON.stringify's. */
  dataText?: { text: string; canonical: string };
}

const standingOf = (job: Job): Standing => {
  const pending = job.state === "waiting" || job.state === "delayed" || job.state === "blocked";
  return { state: pending ? "pending" : (job.state as Standing["state"]), attempts: job.attempts };
};

/**
 * qless's history of the jobs a qless door put. job.lua appends an entry at each put, pop, completion,
 * failure, lost lock and `log`, keeping the first and the newest entries up to `max-job-history`; a
 * core store keeps only the job's timestamps, from which qlessJob rebuilds a history of its last run.
 * So the entries of each job put through the doors are kept here, in memory, and shown while the job
 * stands where the doors' last change left it (its state, and its runs when known); a job changed
 * another way since (run by another door or a native worker) is shown by its timestamps again.
 * The data text the put sent is kept with them when it is spelled otherwise than JSON.stringify spells
 * it (qless-py writes `{"foo": "bar"}`): qless hands the text back as it was given, a core store keeps
 * the value.
 */
export class QlessHistory {
  readonly #jobs = new WeakMap<Backend, Map<string, KeptHistory>>();

  /**
   * A put of `jid` into `queue` (a move, when `before` is in another queue). A history starts at a job's
   * first put; a job put again keeps its history only if it has one here.
   */
  put(backend: Backend, queue: string, jid: string, now: number, mostEntries: number, before: Job | null, dataText?: string): void {
    const jobs = perBackend(this.#jobs, backend);
    if (before && before.queue !== queue) moveEntry(jobs, before.queue, queue, jid, (kept) => kept);
    const kept = jobs.get(keyOf(queue, jid));
    if (before && !kept) return;
    // A new job under a jid seen before (the old one gone) starts afresh.
    const entries = appended(before ? (kept?.entries ?? []) : [], { when: seconds(now), what: "put", q: queue }, mostEntries);
    setNewest(jobs, keyOf(queue, jid), { entries, after: { state: "pending", attempts: null }, ...spelling(dataText) }, MOST_JOBS);
  }

  /** An entry for a move of `job` (as it stands after it) that the doors made: popped, done, failed, timed-out. */
  add(backend: Backend, job: Job, now: number, mostEntries: number, entry: { what: string; [detail: string]: unknown }): void {
    const jobs = this.#jobs.get(backend);
    const kept = jobs?.get(keyOf(job.queue, job.id));
    if (!jobs || !kept) return;
    const entries = appended(kept.entries, { when: seconds(now), ...entry }, mostEntries);
    setNewest(jobs, keyOf(job.queue, job.id), { ...kept, entries, after: standingOf(job), stale: undefined }, MOST_JOBS);
  }

  /**
   * qless's `log`: an entry `{...data, what, when}` on the job's history. A job whose history is not
   * kept here starts one from `shown`, the history it is shown with now.
   */
  log(backend: Backend, job: Job, now: number, mostEntries: number, shown: QlessHistoryEntry[], entry: Record<string, unknown>): void {
    const jobs = perBackend(this.#jobs, backend);
    const kept = jobs.get(keyOf(job.queue, job.id));
    const current = kept && this.of(backend, job) ? kept : { entries: shown, after: standingOf(job) };
    const entries = appended(current.entries, { ...entry, when: seconds(now) } as QlessHistoryEntry, mostEntries);
    setNewest(jobs, keyOf(job.queue, job.id), { ...current, entries }, MOST_JOBS);
  }

  /** A change of `job` the doors made that adds no entry (a retry given back): it stands as it is now. */
  saw(backend: Backend, job: Job): void {
    const kept = this.#jobs.get(backend)?.get(keyOf(job.queue, job.id));
    if (!kept) return;
    kept.after = standingOf(job);
    kept.stale = undefined;
  }

  /**
   * Fields qless leaves stale in its job hash after a change the doors just made to `job`: a delayed
   * retry keeps the old worker and lock expiry, a `complete ... next ... delay` leaves the state
   * `waiting`, a lock in its grace period keeps its old expiry. Shown while the job stands as it is
   * now, its lease unchanged; the doors' next change of it drops them.
   */
  stale(backend: Backend, job: Job, fields: StaleFields): void {
    const kept = this.#jobs.get(backend)?.get(keyOf(job.queue, job.id));
    if (kept) kept.stale = { fields, after: standingOf(job), lease: job.lease?.expiresAt ?? null };
  }

  staleOf(backend: Backend, job: Job): StaleFields | undefined {
    const stale = this.#jobs.get(backend)?.get(keyOf(job.queue, job.id))?.stale;
    if (!stale || !this.of(backend, job)) return undefined;
    const now = standingOf(job);
    const same = stale.after.state === now.state && stale.after.attempts === now.attempts && stale.lease === (job.lease?.expiresAt ?? null);
    return same ? stale.fields : undefined;
  }

  /** The job's history, when it stands where the doors left it. */
  of(backend: Backend, job: Job): QlessHistoryEntry[] | undefined {
    const kept = this.#jobs.get(backend)?.get(keyOf(job.queue, job.id));
    if (!kept) return undefined;
    const now = standingOf(job);
    const same = kept.after.state === now.state && (kept.after.attempts === null || kept.after.attempts === now.attempts);
    return same ? kept.entries : undefined;
  }

  /** The data text the job's put sent, when the job stands where the doors left it and its data is still that. */
  dataTextOf(backend: Backend, job: Job, canonical: string): string | undefined {
    const kept = this.#jobs.get(backend)?.get(keyOf(job.queue, job.id));
    return kept?.dataText?.canonical === canonical && this.of(backend, job) ? kept.dataText.text : undefined;
  }

  forget(backend: Backend, queue: string, jid: string): void {
    this.#jobs.get(backend)?.delete(keyOf(queue, jid));
  }
}

/**
 * The jobs whose history is kept, the most recently changed first: a job's history holds up to
 * `max-job-history` entries (100 by default), so this bounds the memory (about 100 bytes an entry);
 * an older job's history is rebuilt from its timestamps.
 */
const MOST_JOBS = 10_000;

const seconds = (ms: number) => Math.floor(ms / 1000);

/** Data texts longer than this are not kept (with their canonical text, MOST_JOBS of them stay under 21 MB). */
const MOST_DATA_TEXT = 1024;

/** The data text to keep beside a put's history: only a short one JSON.stringify would spell otherwise. */
function spelling(text: string | undefined): Pick<KeptHistory, "dataText"> {
  if (text === undefined || text.length > MOST_DATA_TEXT) return {};
  try {
    const canonical = JSON.stringify(JSON.parse(text));
    return canonical === text ? {} : { dataText: { text, canonical } };
  } catch {
    return {};
  }
}

/**
 * The entries with one more, trimmed first as job.lua trims them: the first entry is kept, then the
 * list is cut to its last `most - 2` (Redis's LTRIM from -most+2: with `most` 2 nothing is cut), so
 * at most `most` remain; `most` 0 or less keeps everything.
 */
function appended(entries: QlessHistoryEntry[], entry: QlessHistoryEntry, most: number): QlessHistoryEntry[] {
  if (most <= 0 || entries.length === 0) return [...entries, entry];
  const [first, ...rest] = entries;
  const start = -most + 2 < 0 ? Math.max(0, rest.length - most + 2) : -most + 2;
  return [first as QlessHistoryEntry, ...rest.slice(start), entry];
}
