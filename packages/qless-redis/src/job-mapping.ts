import type { Backoff, HeldJob, Job, JobState, Json } from "@switchyard/core";

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

/**
 * Maps a qless job onto the core model; `native.qless` keeps what has no core meaning.
 * `stringifiedData`: the job's data text is JSON.stringify's own spelling (a job this process has
 * just written), so it is not spelled again to be compared (about a third of the mapping's time).
 */
export function toCoreJob(doc: SwitchyardDocument, queue: string, stringifiedData = false): Job {
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
  const data = parseJson(q.data);
  return {
    id: q.jid,
    queue,
    name: q.klass,
    data,
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
        expires: q.expires,
        failure: q.failure,
        spawned_from_jid: q.spawned_from_jid,
        dependents: list(q.dependents),
        history,
        // What a trip through another store and back must restore byte for byte (see toImportRecord):
        // the data as its client spelled it (only when JSON.stringify would spell it otherwise), the
        // exact `time` and Switchyard's own meta field as stored.
        ...(typeof q.data === "string" && !stringifiedData && JSON.stringify(data) !== q.data ? { data: q.data } : {}),
        ...(doc.time ? { time: doc.time } : {}),
        ...(doc.meta ? { meta: doc.meta } : {}),
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
  /** The worker and lease expiry fields: qless leaves the last ones on a job no worker holds. */
  worker: string;
  expires: number;
  time: number;
  created: number;
  run_at: number;
  finished: number;
  history: string[];
  failure: string;
  depends: string[];
  /** The recurring job that spawned it (qless's `spawned_from_jid`; '' for none). */
  spawned: string;
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

/** What toCoreJob keeps of a qless record in `native.qless` that an import back into qless reads. */
interface QlessRecordFields {
  history?: HistoryEntry[];
  remaining?: number;
  data?: string;
  time?: string;
  meta?: string;
  failure?: { group?: string; message?: string; when?: number; worker?: string };
  worker?: string;
  expires?: number;
  spawned_from_jid?: string | false;
}

/** Whether a client's JSON text holds the value `json` (JSON.stringify'd) holds. */
function sameJson(text: string, json: string): boolean {
  try {
    return JSON.stringify(JSON.parse(text)) === json;
  } catch {
    return false;
  }
}

/**
 * The meta field of a job coming home to qless, as qless held it (or "" when it had none), when the
 * job's backoff and unique key are still the ones it names. The native fields other stores added on
 * the way describe how those stores held the job (Worker Queue's status column, say), not the job;
 * they are dropped here, and made again from the job if it travels there once more. Null: build anew.
 */
function homeMeta(nativeQless: QlessRecordFields | null, meta: SwitchyardMeta): string | null {
  if (!nativeQless || !Array.isArray(nativeQless.history)) return null;
  let held: SwitchyardMeta = {};
  try {
    held = nativeQless.meta ? (JSON.parse(nativeQless.meta) as SwitchyardMeta) : {};
  } catch {
    return null;
  }
  const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
  if (!same(held.backoff, meta.backoff) || !same(held.uniqueKey, meta.uniqueKey)) return null;
  return nativeQless.meta ?? "";
}

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

/** qless's failure field; the worker and second of the failure qless held, when it is the same failure. */
function failureField(job: Job, held: QlessRecordFields["failure"], defaultGroup: string, finished: number): string {
  const group = job.error?.group ?? defaultGroup;
  const message = job.error?.message ?? "";
  const same = held !== undefined && held.group === group && held.message === message;
  return JSON.stringify({
    group,
    message,
    when: same && typeof held.when === "number" ? held.when : Math.floor(finished),
    worker: same && typeof held.worker === "string" ? held.worker : "",
  });
}

/** Builds the import record; null for a state qless cannot hold (canceled jobs are deleted). */
export function toImportRecord(job: Job, queue: string, defaultGroup: string): ImportRecord | null {
  const state = IMPORT_STATES[job.state];
  if (state === null) return null;
  const nativeQless = (job.native.qless ?? null) as QlessRecordFields | null;
  const { qless: _dropped, ...foreign } = job.native;
  const retries = Math.max(0, job.maxAttempts - 1);
  const ranBefore = job.state === "active" ? Math.max(0, job.attempts - 1) : job.attempts;
  const remaining = typeof nativeQless?.remaining === "number" ? nativeQless.remaining : Math.max(0, retries - ranBefore);
  const homeRecord = Array.isArray(nativeQless?.history);
  const history = homeRecord ? storedHistory(nativeQless!.history!) : synthesizedHistory(job, queue);
  const finished = (job.finishedAt ?? job.createdAt) / 1000;
  const meta: SwitchyardMeta = {};
  if (job.backoff) meta.backoff = job.backoff;
  if (job.uniqueKey) meta.uniqueKey = job.uniqueKey;
  if (Object.keys(foreign).length > 0) meta.native = foreign;
  const data = JSON.stringify(job.data);
  // An active job's lease stays with the store it came from; a finished or waiting one's last worker is history.
  const lastLease = homeRecord && job.state !== "active" ? nativeQless : null;
  return {
    jid: job.id,
    klass: job.name,
    data: typeof nativeQless?.data === "string" && sameJson(nativeQless.data, data) ? nativeQless.data : data,
    priority: job.priority,
    tags: job.tags,
    state,
    retries,
    remaining,
    worker: typeof lastLease?.worker === "string" ? lastLease.worker : "",
    expires: typeof lastLease?.expires === "number" ? lastLease.expires : 0,
    time: homeRecord && typeof nativeQless?.time === "string" ? Number(nativeQless.time) : (job.startedAt ?? job.createdAt) / 1000,
    created: job.createdAt / 1000,
    run_at: (job.runAt ?? job.createdAt) / 1000,
    finished,
    history,
    failure:
      job.state === "failed" || job.error ? failureField(job, homeRecord ? nativeQless?.failure : undefined, defaultGroup, finished) : "",
    depends: job.dependsOn,
    spawned: typeof nativeQless?.spawned_from_jid === "string" ? nativeQless.spawned_from_jid : "",
    meta: homeMeta(nativeQless, meta) ?? (Object.keys(meta).length > 0 ? JSON.stringify(meta) : ""),
    unique: job.uniqueKey ?? "",
    result: job.result === null ? "" : JSON.stringify(job.result),
    progress: job.progress === null ? "" : JSON.stringify(job.progress),
  };
}

/**
 * A job's stored record as switchyard.import-many reads a jid the queue held already (held_record in
 * 91-switchyard-write.lua): klass, data, priority, state, time, the history entries in their stored form,
 * the scheduled score.
 */
export type StoredRecord = [string, string, string, string, string | null, string[], string | null];

/**
 * The stored record of an import record the script wrote, in held_record's form: its fields as
 * written (the script formats `time` with %.20f and stores `run_at` as the scheduled score, both the
 * same doubles), in the state the script answered it was stored in.
 */
export function storedAsWritten(record: ImportRecord, state: ImportRecord["state"]): StoredRecord {
  const scheduled = state === "scheduled" ? String(record.run_at) : null;
  return [record.klass, record.data, String(record.priority), state, String(record.time), record.history, scheduled];
}

/** What the queue holds of a job, from its stored record, read as toCoreJob reads a document. */
export function heldJob(jid: string, [klass, data, priority, state, time, stored, scheduled]: StoredRecord, queue: string): HeldJob {
  const history = stored.map((raw) => {
    const [when, what, details] = JSON.parse(raw) as [number, string, Record<string, unknown> | null | undefined];
    return { ...(details ?? {}), when, what };
  });
  const job = toCoreJob(
    {
      job: {
        jid,
        klass,
        state,
        queue,
        worker: "",
        tracked: false,
        priority: Number(priority),
        expires: 0,
        retries: 0,
        remaining: 0,
        data,
        tags: [],
        history,
        failure: {},
        spawned_from_jid: false,
        dependents: [],
        dependencies: [],
      },
      time: time ?? false,
      scheduled: scheduled ?? false,
    },
    queue,
  );
  return {
    id: job.id,
    name: job.name,
    data: job.data,
    state: job.state,
    priority: job.priority,
    attempts: job.attempts,
    runAt: job.runAt,
    createdAt: job.createdAt,
  };
}
