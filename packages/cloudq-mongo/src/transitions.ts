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
import { UNFINISHED, releaseDependents } from "./dependencies.js";
import { type CloudqDocument, NATIVE, documentToJob, jsonFields } from "./document.js";
import { idOf, jobFilter } from "./ids.js";
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
  const document = await store.jobs.findOne(jobFilter(queue, id));
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
  const now = Date.now();
  const progress = options.progress !== undefined ? jsonFields("progress", options.progress) : { set: {}, unset: {} };
  const set: Filter = { "switchyard.lease.expiresAt": now + leaseMs, ...progress.set };
  const changes = Object.keys(progress.unset).length > 0 ? { $set: set, $unset: progress.unset } : { $set: set };
  const after = await store.jobs.findOneAndUpdate(heldFilter(store, queue, id, options.worker), update(changes), {
    returnDocument: "after",
  });
  if (!after) throw await refusal(store, queue, id, options.worker, "heartbeat", "lease");
  return documentToJob(after, store.layout.stateField, now);
}

export async function setProgress(store: Store, queue: string, id: string, options: { worker?: string; progress: Json }): Promise<Job> {
  const now = Date.now();
  const filter = heldFilter(store, queue, id, options.worker);
  const { set, unset } = jsonFields("progress", options.progress);
  const after = await store.jobs.findOneAndUpdate(filter, update({ $set: set, $unset: unset }), { returnDocument: "after" });
  if (!after) throw await refusal(store, queue, id, options.worker, "report progress on", "invalid");
  return documentToJob(after, store.layout.stateField, now);
}

/**
 * DELETE in Cloudq terms. `remove` deletes the document as node-cloudq 0.0.5+ does, so a result has
 * nowhere to live (capability `results: false`): the completion still succeeds, since refusing it
 * would send finished work round again, and the returned job says `result: null`. `mark-deleted`
 * sets the state to `deleted` as the Ruby server does, and keeps the result.
 */
export async function complete(store: Store, queue: string, id: string, options: CompleteOptions = {}): Promise<Job> {
  const { stateField, completion } = store.layout;
  const now = Date.now();
  const filter = heldFilter(store, queue, id, options.worker);
  let document: CloudqDocument | null;
  if (completion === "remove") {
    document = await store.jobs.findOneAndDelete(filter);
  } else {
    const result = options.result !== undefined ? jsonFields("result", options.result) : { set: {}, unset: {} };
    const set: Filter = { [stateField]: NATIVE.deleted, updated_at: new Date(now), "switchyard.finishedAt": now, ...result.set };
    const unset = { ...FINISHED_UNSET, ...result.unset };
    document = await store.jobs.findOneAndUpdate(filter, update({ $set: set, $unset: unset }), { returnDocument: "after" });
  }
  if (!document) throw await refusal(store, queue, id, options.worker, "complete", "invalid");
  const job = documentToJob(document, stateField, now);
  await releaseDependents(store, queue, job.id);
  const result = completion === "remove" ? null : (options.result ?? job.result);
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
  for (let round = 0; round < MAX_FAIL_ROUNDS; round++) {
    const now = Date.now();
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
  const now = Date.now();
  const result = await store.jobs.updateOne(
    { ...jobFilter(queue, id), [stateField]: { $in: UNFINISHED } },
    update({ $set: { [stateField]: NATIVE.canceled, updated_at: new Date(now), "switchyard.finishedAt": now }, $unset: FINISHED_UNSET }),
  );
  if (result.matchedCount > 0) return;
  const document = await store.jobs.findOne(jobFilter(queue, id));
  if (!document) throw new NotFoundError(`cloudq-mongo: no job ${id} in queue ${queue}`, { queue, id });
  throw new InvalidStateError(`cloudq-mongo: job ${id} is already finished (${String(document[stateField])})`, { queue, id });
}

/**
 * Deletes the documents of these ids that are not reserved (JobRemoval); answers the ids deleted. The
 * state test is in the delete itself, so a job a worker reserved since it was read stays.
 */
export async function removeJobs(store: Store, queue: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const { stateField } = store.layout;
  const found = await store.jobs.find({ $or: ids.map((id) => jobFilter(queue, id)) }, { projection: { _id: 1, switchyard: 1 } }).toArray();
  const wanted = new Set(ids);
  const documents = found.filter((document) => wanted.has(idOf(document)));
  if (documents.length === 0) return [];
  const keys = documents.map((document) => document._id);
  await store.jobs.deleteMany({ _id: { $in: keys }, [stateField]: { $ne: NATIVE.reserved } });
  const left = new Set(
    (await store.jobs.find({ _id: { $in: keys } }, { projection: { _id: 1 } }).toArray()).map((document) => String(document._id)),
  );
  return documents.filter((document) => !left.has(String(document._id))).map((document) => idOf(document));
}
