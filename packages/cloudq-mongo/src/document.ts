import type { Backoff, Job, JobError, JobState, Json, Lease } from "@switchyard/core";
import { DEFAULT_MAX_ATTEMPTS } from "@switchyard/core";
import { ObjectId } from "mongodb";
import { idOf } from "./ids.js";
import type { StateField } from "./options.js";

/** The state values a `cloudq.jobs` document can hold. Legacy servers only ever query `queued`. */
export const NATIVE = {
  queued: "queued",
  reserved: "reserved",
  deleted: "deleted",
  /** Failed for good. Not a legacy value: chosen because `{queue, <state>: 'queued'}` skips it. */
  failed: "failed",
  /** Withdrawn by cancel(); likewise invisible to legacy reserves. */
  canceled: "canceled",
  /** Waiting for the jobs in `switchyard.dependsOn` to complete; invisible to legacy reserves. */
  blocked: "blocked",
} as const;

/**
 * Everything Switchyard adds to the Cloudq layout lives in this one sub-document, which legacy
 * servers never read or write. A document without it (a legacy insert) is a plain job: priority 0,
 * no delay, no lease, 0 attempts of DEFAULT_MAX_ATTEMPTS. Fields holding a default are left out, so
 * a plain publish writes no sub-document at all, exactly as node-cloudq 0.2 does. Times are epoch ms.
 */
export interface SwitchyardFields {
  /** Priority above 0. Sorted descending: a missing value sorts after every number, i.e. as 0. */
  boost?: number;
  /** Minus the priority, for priority below 0. Sorted ascending: missing sorts first, i.e. as 0. */
  demote?: number;
  runAt?: number;
  attempts?: number;
  maxAttempts?: number;
  backoff?: Backoff;
  lease?: Lease;
  uniqueKey?: string;
  /** JSON [queue, uniqueKey], present only while the job is unfinished (a sparse unique index). */
  uniqueSlot?: string;
  /** A caller-chosen or imported id that is not the `_id` (see ids.ts). */
  id?: string;
  idSlot?: string;
  result?: Json;
  /** The result as JSON, when it holds a key MongoDB cannot store (see jsonFields). */
  resultJson?: string;
  error?: JobError;
  progress?: Json;
  /** The progress as JSON, when it holds a key MongoDB cannot store (see jsonFields). */
  progressJson?: string;
  startedAt?: number;
  finishedAt?: number;
  tags?: string[];
  /** The jobs of the same queue this one waits for (state `blocked` until they complete). */
  dependsOn?: string[];
  /** `data` was not an array, so `args` holds `[data]` for Cloudq workers. */
  wrapped?: true;
  /**
   * Job.data as JSON, when it holds a key MongoDB cannot store (see isStorable); `args` is then
   * left out of the document, since no truthful array of arguments can be written there.
   */
  argsJson?: string;
  /** Native fields that cannot be top-level keys (layout names, `$` or `.` in the name), as JSON. */
  nativeJson?: string;
}

/**
 * Every Mongo-era server and Switchyard write ObjectId `_id`s, but a document inserted by hand or
 * by some other tool may carry a string or a number; idOf() turns any of them into Job.id.
 */
export type DocumentId = ObjectId | string | number;

export interface CloudqDocument {
  _id: DocumentId;
  queue: string;
  klass?: string;
  args?: unknown;
  inserted_at?: Date;
  updated_at?: Date;
  /** Written by the Ruby server (MongoMapper `timestamps!`) instead of inserted_at. */
  created_at?: Date;
  switchyard?: SwitchyardFields;
  [field: string]: unknown;
}

/** Top-level keys with a meaning in the layout; they never carry Job.native values. */
const LAYOUT_KEYS = new Set([
  "_id",
  "queue",
  "klass",
  "args",
  "queue_state",
  "workflow_state",
  "inserted_at",
  "updated_at",
  "created_at",
  "switchyard",
]);

export function priorityFields(priority: number): Pick<SwitchyardFields, "boost" | "demote"> {
  if (priority > 0) return { boost: priority };
  if (priority < 0) return { demote: -priority };
  return {};
}

/**
 * MongoDB refuses field names that start with `$`, contain `.` (servers before 5.0, and FerretDB)
 * or a NUL byte, at any depth. Job data and native fields are arbitrary JSON, so every level is checked.
 */
export function isStorable(value: unknown): boolean {
  if (Array.isArray(value)) return value.every(isStorable);
  if (value === null || typeof value !== "object" || value instanceof Date || value instanceof ObjectId) return true;
  return Object.entries(value).every(([key, member]) => storableKey(key) && isStorable(member));
}

function storableKey(key: string): boolean {
  return !key.startsWith("$") && !key.includes(".") && !key.includes("\0");
}

/**
 * Cloudq's args is an array; any other value is stored as `[value]` and unwrapped on read. Data
 * MongoDB cannot store as fields is kept whole, as JSON text, in `switchyard.argsJson`.
 */
export function argsOf(data: Json): { args?: Json[]; wrapped?: true; argsJson?: string } {
  if (!isStorable(data)) return { argsJson: JSON.stringify(data) };
  return Array.isArray(data) ? { args: data } : { args: [data], wrapped: true };
}

/**
 * Splits Job.native into what can be a top-level document key (kept there, where legacy workers
 * see it, as node-cloudq stored every extra key of a POSTed job) and what cannot (kept as JSON):
 * layout names, and keys or values holding a name MongoDB refuses at any depth.
 */
export function placeNative(native: Record<string, unknown>): { topLevel: Record<string, unknown>; nativeJson?: string } {
  const topLevel: Record<string, unknown> = {};
  const rest: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(native)) {
    if (value === undefined) continue;
    const placeable = key !== "" && !LAYOUT_KEYS.has(key) && storableKey(key) && isStorable(value);
    if (placeable) topLevel[key] = value;
    else rest[key] = value;
  }
  return Object.keys(rest).length > 0 ? { topLevel, nativeJson: JSON.stringify(rest) } : { topLevel };
}

/**
 * The `$set` and `$unset` of `switchyard.<field>` for a result or progress value: the value itself,
 * or, when it holds a key MongoDB refuses, `<field>Json` with it as JSON text, so that it comes
 * back as it was. Whichever form is written, the other is removed.
 */
export function jsonFields(field: "result" | "progress", value: Json): { set: Record<string, unknown>; unset: Record<string, ""> } {
  const plain = `switchyard.${field}`;
  const json = `switchyard.${field}Json`;
  return isStorable(value)
    ? { set: { [plain]: value }, unset: { [json]: "" } }
    : { set: { [json]: JSON.stringify(value) }, unset: { [plain]: "" } };
}

/** The stored result or progress, in whichever form jsonFields() wrote it. */
function jsonValue(plain: Json | undefined, json: string | undefined): Json {
  return json !== undefined ? (JSON.parse(json) as Json) : (plain ?? null);
}

/** Drops undefined members so the stored sub-document has only meaningful fields. */
export function compact(fields: SwitchyardFields): SwitchyardFields | undefined {
  const entries = Object.entries(fields).filter(([, value]) => value !== undefined);
  return entries.length > 0 ? (Object.fromEntries(entries) as SwitchyardFields) : undefined;
}

export function coreStateOf(document: CloudqDocument, stateField: StateField, now: number): JobState {
  const value = document[stateField];
  switch (value) {
    case NATIVE.queued:
      return (document.switchyard?.runAt ?? 0) > now ? "delayed" : "waiting";
    case NATIVE.reserved:
      return "active";
    case NATIVE.deleted:
      return "completed";
    case NATIVE.failed:
      return "failed";
    case NATIVE.blocked:
      return "blocked";
    default:
      // `canceled`, or a value (or none) no Mongo-era server writes: never handed out, so not
      // runnable. stateFilter("canceled") selects the same documents.
      return "canceled";
  }
}

function epochOf(document: CloudqDocument): number {
  const stamp = document.inserted_at ?? document.created_at;
  if (stamp instanceof Date) return stamp.getTime();
  return document._id instanceof ObjectId ? document._id.getTimestamp().getTime() : 0;
}

function nativeOf(document: CloudqDocument, stateField: StateField): Record<string, unknown> {
  const native: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(document)) {
    if (!LAYOUT_KEYS.has(key) || (key !== stateField && (key === "queue_state" || key === "workflow_state"))) native[key] = value;
  }
  const extra = document.switchyard?.nativeJson;
  if (extra) Object.assign(native, JSON.parse(extra) as Record<string, unknown>);
  return native;
}

function dataOf(document: CloudqDocument): Json {
  const argsJson = document.switchyard?.argsJson;
  if (argsJson !== undefined) return JSON.parse(argsJson) as Json;
  const args = (document.args ?? []) as Json;
  if (document.switchyard?.wrapped && Array.isArray(args)) return args[0] ?? null;
  return args;
}

/** Reads a raw document, legacy or not, as a core Job. */
export function documentToJob(document: CloudqDocument, stateField: StateField, now = Date.now()): Job {
  const extras = document.switchyard ?? {};
  const state = coreStateOf(document, stateField, now);
  return {
    id: idOf(document),
    queue: document.queue,
    name: typeof document.klass === "string" ? document.klass : String(document.klass ?? ""),
    data: dataOf(document),
    state,
    priority: extras.boost ?? (extras.demote !== undefined ? -extras.demote : 0),
    runAt: state === "delayed" ? (extras.runAt ?? null) : null,
    attempts: extras.attempts ?? 0,
    maxAttempts: extras.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    backoff: extras.backoff ?? null,
    lease: state === "active" ? (extras.lease ?? null) : null,
    createdAt: epochOf(document),
    startedAt: extras.startedAt ?? null,
    finishedAt: extras.finishedAt ?? null,
    result: jsonValue(extras.result, extras.resultJson),
    error: extras.error ?? null,
    progress: jsonValue(extras.progress, extras.progressJson),
    tags: extras.tags ?? [],
    dependsOn: extras.dependsOn ?? [],
    uniqueKey: extras.uniqueKey ?? null,
    native: nativeOf(document, stateField),
  };
}
