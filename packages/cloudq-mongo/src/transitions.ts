import {
  type CompleteOptions,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_ATTEMPTS,
  type FailOptions,
  type HeartbeatOptions,
  InvalidStateError,
  type Job,
  type Json,
  LeaseLostError,
  NotFoundError,
  ValidationError,
  backoffDelay,
} from "@switchyard/core";
import { type AnyBulkWriteOperation, ObjectId } from "mongodb";
import { UNFINISHED, dependentsProbe, releaseDependents } from "./dependencies.js";
import { type CloudqDocument, NATIVE, documentToJob, jsonFields } from "./document.js";
import { forgetHanded, handedDocument, refreshHanded } from "./handed.js";
import { asObjectId, idOf, jobFilter } from "./ids.js";
import { documentsOf, findDocument } from "./reads.js";
import { type Store, update } from "./store.js";

type Filter = Record<string, unknown>;

/** Leaving the runnable states frees the unique key and drops the lease. */
const FINISHED_UNSET = { "switchyard.lease": "", "switchyard.uniqueSlot": "", "switchyard.runAt": "" };

/** The filter for "reserved, and held by `worker` when one is named". */
function heldFilter(store: Store, queue: string, id: string, worker: string | undefined): Filter {
  const filter: Filter = { ...jobFilter(queue, id), [store.layout.stateField]: NATIVE.reserved };
  if (worker !== undefined) filter["switchyard.lease.worker"] = worker;
  return filter;
}

/**
 * A conditional write matched nothing: read the job once to say why, with the error the contract
 * names (unknown job, not active, or the lease is someone else's).
 */
async function refusal(
  store: Store,
  queue: string,
  id: string,
  worker: string | undefined,
  what: string,
  notActive: "invalid" | "lease",
): Promise<Error> {
  return refusalOf(await findDocument(store, queue, id), store, queue, id, worker, what, notActive);
}

function refusalOf(
  document: CloudqDocument | null,
  store: Store,
  queue: string,
  id: string,
  worker: string | undefined,
  what: string,
  notActive: "invalid" | "lease",
): Error {
  if (!document) return new NotFoundError(`cloudq-mongo: no job ${id} in queue ${queue}`, { queue, id });
  const state = document[store.layout.stateField];
  if (state !== NATIVE.reserved) {
    const message = `cloudq-mongo: cannot ${what} job ${id}: it is ${String(state)}, not reserved`;
    return notActive === "invalid"
      ? new InvalidStateError(message, { queue, id, state })
      : new LeaseLostError(message, { queue, id, state });
  }
  const holder = document.switchyard?.lease?.worker ?? null;
  if (worker !== undefined && holder !== worker) {
    return new LeaseLostError(
      `cloudq-mongo: cannot ${what} job ${id}: its lease is held by ${holder ?? "a legacy Cloudq worker"}, not ${worker}`,
      {
        queue,
        id,
        holder,
      },
    );
  }
  return new LeaseLostError(`cloudq-mongo: job ${id} changed while it was being updated; retry`, { queue, id });
}

function checkLeaseMs(leaseMs: number): void {
  if (!Number.isInteger(leaseMs) || leaseMs <= 0)
    throw new ValidationError("cloudq-mongo: leaseMs must be a positive integer", { leaseMs });
}

export async function heartbeat(store: Store, queue: string, id: string, options: HeartbeatOptions): Promise<Job> {
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  checkLeaseMs(leaseMs);
  const now = store.now();
  const progress = options.progress !== undefined ? jsonFields("progress", options.progress) : { set: {}, unset: {} };
  const set: Filter = { "switchyard.lease.expiresAt": now + leaseMs, ...progress.set };
  const changes = Object.keys(progress.unset).length > 0 ? { $set: set, $unset: progress.unset } : { $set: set };
  const after = await store.jobs.findOneAndUpdate(heldFilter(store, queue, id, options.worker), update(changes), {
    returnDocument: "after",
  });
  if (!after) throw await refusal(store, queue, id, options.worker, "heartbeat", "lease");
  refreshHanded(store, queue, id, after);
  return documentToJob(after, store.layout.stateField, now);
}

export async function setProgress(store: Store, queue: string, id: string, options: { worker?: string; progress: Json }): Promise<Job> {
  const now = store.now();
  const filter = heldFilter(store, queue, id, options.worker);
  const { set, unset } = jsonFields("progress", options.progress);
  const after = await store.jobs.findOneAndUpdate(filter, update({ $set: set, $unset: unset }), { returnDocument: "after" });
  if (!after) throw await refusal(store, queue, id, options.worker, "report progress on", "invalid");
  refreshHanded(store, queue, id, after);
  return documentToJob(after, store.layout.stateField, now);
}

/**
 * DELETE in Cloudq terms. `remove` deletes the document as node-cloudq 0.0.5+ does, so a result has
 * nowhere to live (capability `results: false`): the completion still succeeds, since refusing it
 * would send finished work round again, and the returned job says `result: null`. `mark-deleted`
 * sets the state to `deleted` as the Ruby server does, and keeps the result.
 */
export async function complete(store: Store, queue: string, id: string, options: CompleteOptions = {}): Promise<Job> {
  const lead = completionStatement(store, queue, id, options);
  if (lead) {
    // One update command: the completion and the probe for its blocked dependents.
    const fused = lead(store.now());
    try {
      const result = await store.jobs.bulkWrite([fused.statement, dependentsProbe(store, queue, fused.id)], { ordered: true });
      forgetHanded(store, queue, id);
      if (result.matchedCount > result.modifiedCount) await releaseDependents(store, queue, fused.id);
      return completedJob(store, fused.written, options);
    } catch (error) {
      if (!refusedFirstStatement(error)) throw error;
      forgetHanded(store, queue, id);
    }
  }
  const written = await writeCompletion(store, queue, id, options);
  if ("refused" in written) throw written.refused;
  const job = completedJob(store, written, options);
  await releaseDependents(store, queue, job.id);
  return job;
}

/** The completion as one update statement, and the document it leaves (see completionStatement). */
export interface LeadCompletion {
  statement: AnyBulkWriteOperation<CloudqDocument>;
  written: { document: CloudqDocument; now: number };
  /** The completed job's id. */
  id: string;
}

/**
 * A path no upsert can create: the filter's `queue` is a string, so an insert that would set
 * `queue.<this>` fails (MongoDB and FerretDB answer code 28, "Cannot create field ... in element").
 */
const NEVER_INSERTED = "queue.switchyardNeverInserted";

/**
 * In `mark-deleted` mode, the completion of a job this backend handed out (handed.ts) as ONE update
 * statement that can lead an update command: an update answers no document, so the completed job
 * is answered from the handed-out one, and the filter pins every field that can change while the
 * job is held (its holder, attempt and progress), so a stale or lost job matches nothing. A
 * statement that matches nothing must stop the command, so that the claims after it do not run:
 * it is an upsert whose insert always fails (NEVER_INSERTED, and the `_id` of a job that exists),
 * which ends an ordered command with a write error at its first statement, on MongoDB and on
 * FerretDB alike (whose update commands stop at the first error); nothing after it has run, and
 * the caller then completes the ordinary way, which also says why it was refused.
 * Undefined when the completion cannot go this way (`remove` mode deletes; a job this backend did
 * not hand out; another worker named).
 */
export function completionStatement(
  store: Store,
  queue: string,
  id: string,
  options: CompleteOptions,
): ((now: number) => LeadCompletion) | undefined {
  const { stateField, completion } = store.layout;
  if (completion !== "mark-deleted") return undefined;
  const held = handedDocument(store, queue, id);
  const extras = held?.switchyard ?? {};
  const worker = extras.lease?.worker;
  if (!held || worker === undefined || (options.worker !== undefined && options.worker !== worker)) return undefined;
  const filter: Filter = {
    _id: held._id,
    queue,
    [stateField]: NATIVE.reserved,
    "switchyard.lease.worker": worker,
    "switchyard.attempts": extras.attempts ?? null,
    "switchyard.progress": extras.progress ?? null,
    "switchyard.progressJson": extras.progressJson ?? null,
  };
  return (now) => {
    const { set, unset } = completionChanges(store, options, now);
    return {
      statement: {
        updateOne: { filter, update: update({ $set: set, $unset: unset, $setOnInsert: { [NEVER_INSERTED]: true } }), upsert: true },
      },
      written: { document: withChanges(held, set, unset), now },
      id: idOf(held),
    };
  };
}

/** Whether a command failed at its first statement only (a lead completion that matched nothing): nothing else ran. */
export function refusedFirstStatement(error: unknown): boolean {
  const writeErrors = (error as { writeErrors?: unknown }).writeErrors;
  const list = (Array.isArray(writeErrors) ? writeErrors : writeErrors ? [writeErrors] : []) as Array<{ index?: number; code?: number }>;
  return list.length > 0 && list.every((entry) => entry.index === 0 && (entry.code === 28 || entry.code === 11000));
}

/** A document with `$set` and `$unset` of top-level and `switchyard.<field>` paths applied, as the server applies them. */
function withChanges(document: CloudqDocument, set: Filter, unset: Filter): CloudqDocument {
  const next: CloudqDocument = { ...document };
  const extras: Record<string, unknown> = { ...(document.switchyard ?? {}) };
  for (const [path, value] of Object.entries(set)) {
    if (path.startsWith("switchyard.")) extras[path.slice("switchyard.".length)] = value;
    else next[path] = value;
  }
  for (const path of Object.keys(unset)) {
    if (path.startsWith("switchyard.")) delete extras[path.slice("switchyard.".length)];
    else delete next[path];
  }
  next.switchyard = extras as CloudqDocument["switchyard"];
  return next;
}

export type CompletionWrite = { document: CloudqDocument; now: number } | { refused: Error };

/**
 * The completion write of complete() and completeAndReserve(), one findAndModify that answers the
 * document. An id that is an ObjectId's hex string is first tried as the `_id` itself, which every
 * server finds by its `_id` index (FerretDB evaluates the `$or` of jobFilter over the whole queue);
 * when that misses, the one read that explains a refusal also finds a job whose id is kept in
 * `switchyard.id`, which is then completed by its own `_id`.
 */
export async function writeCompletion(store: Store, queue: string, id: string, options: CompleteOptions): Promise<CompletionWrite> {
  const written = await completionOrRefusal(store, queue, id, options);
  if (!("refused" in written)) forgetHanded(store, queue, id);
  return written;
}

async function completionOrRefusal(store: Store, queue: string, id: string, options: CompleteOptions): Promise<CompletionWrite> {
  const now = store.now();
  const guess = asObjectId(id);
  if (guess) {
    const document = await completionWrite(store, { _id: guess, queue }, options, now);
    if (document) return { document, now };
  } else {
    const document = await completionWrite(store, jobFilter(queue, id), options, now);
    if (document) return { document, now };
  }
  const current = await findDocument(store, queue, id);
  const held =
    current?.[store.layout.stateField] === NATIVE.reserved &&
    (options.worker === undefined || current.switchyard?.lease?.worker === options.worker);
  if (guess && current && held && !(current._id instanceof ObjectId && current._id.equals(guess))) {
    const document = await completionWrite(store, { _id: current._id, queue }, options, now);
    if (document) return { document, now };
  }
  return { refused: refusalOf(current, store, queue, id, options.worker, "complete", "invalid") };
}

async function completionWrite(store: Store, which: Filter, options: CompleteOptions, now: number): Promise<CloudqDocument | null> {
  const { stateField, completion } = store.layout;
  const filter: Filter = { ...which, [stateField]: NATIVE.reserved };
  if (options.worker !== undefined) filter["switchyard.lease.worker"] = options.worker;
  if (completion === "remove") return store.jobs.findOneAndDelete(filter);
  const { set, unset } = completionChanges(store, options, now);
  return store.jobs.findOneAndUpdate(filter, update({ $set: set, $unset: unset }), { returnDocument: "after" });
}

/** What a `mark-deleted` completion sets and unsets. */
function completionChanges(store: Store, options: CompleteOptions, now: number): { set: Filter; unset: Filter } {
  const result = options.result !== undefined ? jsonFields("result", options.result) : { set: {}, unset: {} };
  const set: Filter = { [store.layout.stateField]: NATIVE.deleted, updated_at: new Date(now), "switchyard.finishedAt": now, ...result.set };
  return { set, unset: { ...FINISHED_UNSET, ...result.unset } };
}

/** The completed job as complete() answers it. */
export function completedJob(store: Store, written: { document: CloudqDocument; now: number }, options: CompleteOptions): Job {
  const { document, now } = written;
  const job = documentToJob(document, store.layout.stateField, now);
  const result = store.layout.completion === "remove" ? null : (options.result ?? job.result);
  return { ...job, state: "completed", lease: null, runAt: null, finishedAt: now, result };
}

const MAX_FAIL_ROUNDS = 5;

/**
 * Retries while attempts remain (back to `queued`, with a run-at time when there is a backoff) or
 * fails for good (`failed`, which legacy reserves skip). The decision depends on the stored
 * attempts and policy, so the write is conditional on the lease and attempts it was computed from.
 */
export async function fail(store: Store, queue: string, id: string, options: FailOptions): Promise<Job> {
  const { stateField } = store.layout;
  forgetHanded(store, queue, id);
  for (let round = 0; round < MAX_FAIL_ROUNDS; round++) {
    const now = store.now();
    const current = await store.jobs.findOne(heldFilter(store, queue, id, options.worker));
    if (!current) throw await refusal(store, queue, id, options.worker, "fail", "invalid");
    const extras = current.switchyard ?? {};
    const attempts = extras.attempts ?? 0;
    const retry = options.retry !== false && attempts < (extras.maxAttempts ?? DEFAULT_MAX_ATTEMPTS);
    const set: Filter = { updated_at: new Date(now), "switchyard.error": options.error };
    const unset: Filter = { "switchyard.lease": "" };
    if (retry) {
      const delay = options.retryDelay ?? backoffDelay(extras.backoff ?? null, attempts);
      set[stateField] = NATIVE.queued;
      if (delay > 0) set["switchyard.runAt"] = now + delay;
      else unset["switchyard.runAt"] = "";
    } else {
      set[stateField] = NATIVE.failed;
      set["switchyard.finishedAt"] = now;
      Object.assign(unset, FINISHED_UNSET);
    }
    const guard: Filter = {
      _id: current._id,
      [stateField]: NATIVE.reserved,
      "switchyard.lease.worker": extras.lease?.worker ?? null,
      "switchyard.attempts": extras.attempts ?? null,
    };
    const after = await store.jobs.findOneAndUpdate(guard, update({ $set: set, $unset: unset }), { returnDocument: "after" });
    if (after) return documentToJob(after, stateField, now);
  }
  throw await refusal(store, queue, id, options.worker, "fail", "invalid");
}

/** Withdraws a queued, blocked or reserved job; its worker's later complete() is refused. */
export async function cancel(store: Store, queue: string, id: string): Promise<void> {
  const { stateField } = store.layout;
  forgetHanded(store, queue, id);
  const now = store.now();
  const result = await store.jobs.updateOne(
    { ...jobFilter(queue, id), [stateField]: { $in: UNFINISHED } },
    update({ $set: { [stateField]: NATIVE.canceled, updated_at: new Date(now), "switchyard.finishedAt": now }, $unset: FINISHED_UNSET }),
  );
  if (result.matchedCount > 0) return;
  const document = await findDocument(store, queue, id);
  if (!document) throw new NotFoundError(`cloudq-mongo: no job ${id} in queue ${queue}`, { queue, id });
  throw new InvalidStateError(`cloudq-mongo: job ${id} is already finished (${String(document[stateField])})`, { queue, id });
}

/**
 * Deletes the documents of these ids that are not reserved (JobRemoval); answers the ids deleted. The
 * state test is in the delete itself, so a job a worker reserved since it was read stays. Where the
 * server reads every document for an `$in` (ServerTraits), each document is deleted by its own `_id`.
 */
export async function removeJobs(store: Store, queue: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const { stateField } = store.layout;
  const wanted = new Set(ids);
  const documents = [...(await documentsOf(store, queue, ids)).entries()].filter(([id]) => wanted.has(id));
  if (documents.length === 0) return [];
  const notReserved = { [stateField]: { $ne: NATIVE.reserved } };
  if (store.server.equalitiesOnly) {
    const deleted = await Promise.all(documents.map(([, document]) => store.jobs.deleteOne({ _id: document._id, ...notReserved })));
    return documents.filter((_, i) => deleted[i]?.deletedCount === 1).map(([id]) => id);
  }
  const keys = documents.map(([, document]) => document._id);
  await store.jobs.deleteMany({ _id: { $in: keys }, ...notReserved });
  const left = new Set(
    (await store.jobs.find({ _id: { $in: keys } }, { projection: { _id: 1 } }).toArray()).map((document) => String(document._id)),
  );
  return documents.filter(([, document]) => !left.has(String(document._id))).map(([id]) => id);
}
