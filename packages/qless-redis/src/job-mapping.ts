import type { Backoff, Job, JobState, Json } from "@switchyard/core";

/** qless job JSON as the script encodes it (cjson writes empty arrays as `{}`). */
export interface QlessJobJson {
  jid: string;
  klass: string;
  state: string;
  queue: string;
  worker: string;
  tracked: boolean;
  priority: number;
  expires: number;
  retries: number;
  remaining: number;
  data: string;
  tags: string[] | Record<string, never>;
  history: Array<{ when: number; what: string; [key: string]: unknown }> | Record<string, never>;
  failure: { group?: string; message?: string; when?: number; worker?: string };
  spawned_from_jid: string | false;
  dependents: string[] | Record<string, never>;
  dependencies: string[] | Record<string, never>;
}

/** What the switchyard.* commands answer per job: the qless document plus Switchyard's fields. */
export interface SwitchyardDocument {
  job: QlessJobJson;
  home?: string;
  /** `%.20f` epoch seconds of the last put, pop or complete. */
  time?: string | false;
  meta?: string | false;
  result?: string | false;
  progress?: string | false;
  /** Score in the queue's scheduled set, when the job is in it. */
  scheduled?: string | false;
}

/** Switchyard-only job fields kept in the `switchyard.meta` hash field. */
export interface SwitchyardMeta {
  backoff?: Backoff | null;
  uniqueKey?: string | null;
  /** Fields of another system's job with no core or qless meaning (kept for round trips). */
  native?: Record<string, unknown>;
}

/** cjson writes an empty Lua table as `{}`; qless clients read it as an empty list. */
export function list<T>(value: T[] | Record<string, never> | undefined | null): T[] {
  return Array.isArray(value) ? value : [];
}

const STATES: Record<string, JobState> = {
  waiting: "waiting",
  stalled: "waiting", // set by qless's timeout command; the job waits at the head of its queue
  scheduled: "delayed",
  running: "active",
  depends: "blocked",
  complete: "completed",
  failed: "failed",
};

function parseJson(text: string | false | undefined | null): Json | null {
  if (text === undefined || text === null || text === false || text === "") return null;
  try {
    return JSON.parse(text) as Json;
  } catch {
    return text;
  }
}

const seconds = (value: number) => Math.round(value * 1000);

/** Maps a qless job onto the core model; `native.qless` keeps what has no core meaning. */
export function toCoreJob(doc: SwitchyardDocument, queue: string): Job {
  const q = doc.job;
  const history = list(q.history);
  const pops = history.filter((entry) => entry.what === "popped");
  const firstPut = history.find((entry) => entry.what === "put");
  const time = doc.time ? Number(doc.time) : null;
  const meta = (parseJson(doc.meta) ?? {}) as SwitchyardMeta;
  let state = STATES[q.state] ?? "waiting";
  // `complete ... next Q delay D` leaves state=waiting while the job sits in the scheduled set.
  if (state === "waiting" && doc.scheduled) state = "delayed";
  const lastPop = pops.at(-1);
  const failure = q.failure && typeof q.failure.message === "string" ? q.failure : null;
  const finishedAt =
    state === "completed" && time !== null
      ? seconds(time)
      : state === "failed" && typeof failure?.when === "number"
        ? seconds(failure.when)
        : null;
  const startedAt = state === "active" && time !== null ? seconds(time) : lastPop ? seconds(lastPop.when) : null;
  return {
    id: q.jid,
    queue,
    name: q.klass,
    data: parseJson(q.data),
    state,
    priority: q.priority,
    runAt: doc.scheduled ? seconds(Number(doc.scheduled)) : null,
    attempts: pops.length,
    maxAttempts: Math.max(1, q.retries + 1),
    backoff: meta.backoff ?? null,
    lease: state === "active" && q.worker ? { worker: q.worker, expiresAt: seconds(q.expires) } : null,
    createdAt: firstPut ? seconds(firstPut.when) : time !== null ? seconds(time) : 0,
    startedAt,
    finishedAt,
    result: parseJson(doc.result),
    error: failure ? { ...(failure.group ? { group: failure.group } : {}), message: failure.message ?? "" } : null,
    progress: parseJson(doc.progress),
    tags: list(q.tags),
    dependsOn: list(q.dependencies),
    uniqueKey: meta.uniqueKey ?? null,
    native: {
      ...(meta.native ?? {}),
      qless: {
        retries: q.retries,
        remaining: q.remaining,
        tracked: q.tracked,
        worker: q.worker,
        failure: q.failure,
        spawned_from_jid: q.spawned_from_jid,
        dependents: list(q.dependents),
        history,
      },
    },
  };
}

/** The record switchyard.import writes; see 91-switchyard-write.lua. */
export interface ImportRecord {
  jid: string;
  klass: string;
  data: string;
  priority: number;
  tags: string[];
  state: "waiting" | "scheduled" | "depends" | "failed" | "complete";
  retries: number;
  remaining: number;
  time: number;
  created: number;
  run_at: number;
  finished: number;
  history: string[];
  failure: string;
  depends: string[];
  meta: string;
  /** The unique key to register in `ql:sy:unique:<queue>` ('' for none). */
  unique: string;
  result: string;
  progress: string;
}

const IMPORT_STATES: Record<JobState, ImportRecord["state"] | null> = {
  waiting: "waiting",
  active: "waiting", // its lease belongs to the store it came from
  delayed: "scheduled",
  blocked: "depends",
  failed: "failed",
  completed: "complete",
  canceled: null,
};

type HistoryEntry = { when: number; what: string; [key: string]: unknown };

/** History entries back in qless's stored form `[when, what, details?]`. */
function storedHistory(entries: HistoryEntry[]): string[] {
  return entries.map(({ when, what, ...details }) =>
    JSON.stringify(Object.keys(details).length > 0 ? [when, what, details] : [when, what]),
  );
}

/** The qless history a job from another system would have: its put, its runs, its end. */
function synthesizedHistory(job: Job, queue: string): string[] {
  const at = (ms: number | null) => Math.floor((ms ?? job.createdAt) / 1000);
  const entries: HistoryEntry[] = [{ when: at(job.createdAt), what: "put", q: queue }];
  for (let run = 0; run < job.attempts; run++) {
    entries.push({ when: at(job.startedAt), what: "popped", worker: job.lease?.worker ?? "switchyard-import" });
  }
  if (job.state === "completed") entries.push({ when: at(job.finishedAt), what: "done" });
  if (job.state === "failed") entries.push({ when: at(job.finishedAt), what: "failed", group: job.error?.group ?? "switchyard-import" });
  return storedHistory(entries);
}

/** Builds the import record; null for a state qless cannot hold (canceled jobs are deleted). */
export function toImportRecord(job: Job, queue: string, defaultGroup: string): ImportRecord | null {
  const state = IMPORT_STATES[job.state];
  if (state === null) return null;
  const nativeQless = (job.native.qless ?? null) as { history?: HistoryEntry[]; remaining?: number } | null;
  const { qless: _dropped, ...foreign } = job.native;
  const retries = Math.max(0, job.maxAttempts - 1);
  const ranBefore = job.state === "active" ? Math.max(0, job.attempts - 1) : job.attempts;
  const remaining = typeof nativeQless?.remaining === "number" ? nativeQless.remaining : Math.max(0, retries - ranBefore);
  const history = Array.isArray(nativeQless?.history) ? storedHistory(nativeQless.history) : synthesizedHistory(job, queue);
  const finished = (job.finishedAt ?? job.createdAt) / 1000;
  const meta: SwitchyardMeta = {};
  if (job.backoff) meta.backoff = job.backoff;
  if (job.uniqueKey) meta.uniqueKey = job.uniqueKey;
  if (Object.keys(foreign).length > 0) meta.native = foreign;
  return {
    jid: job.id,
    klass: job.name,
    data: JSON.stringify(job.data),
    priority: job.priority,
    tags: job.tags,
    state,
    retries,
    remaining,
    time: (job.startedAt ?? job.createdAt) / 1000,
    created: job.createdAt / 1000,
    run_at: (job.runAt ?? job.createdAt) / 1000,
    finished,
    history,
    failure:
      job.state === "failed" || job.error
        ? JSON.stringify({
            group: job.error?.group ?? defaultGroup,
            message: job.error?.message ?? "",
            when: Math.floor(finished),
            worker: "",
          })
        : "",
    depends: job.dependsOn,
    meta: Object.keys(meta).length > 0 ? JSON.stringify(meta) : "",
    unique: job.uniqueKey ?? "",
    result: job.result === null ? "" : JSON.stringify(job.result),
    progress: job.progress === null ? "" : JSON.stringify(job.progress),
  };
}
