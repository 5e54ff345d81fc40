import {
  type Backend,
  type Capabilities,
  type CompleteOptions,
  DEFAULT_LEASE_MS,
  type DependencyEditing,
  type EnqueueInput,
  type EnqueueResult,
  type JobEventFeed,
  type Recurrence,
  type RecurringJobs,
  type ReserveOptions,
  ValidationError,
  guardBackend,
  normalizeEnqueueInput,
} from "@switchyard/core";
import { MongoClient } from "mongodb";
import { type AddedJob, forgetCandidates, releaseAll } from "./candidates.js";
import { dependentsOf } from "./dependencies.js";
import { addDependencies, removeDependencies } from "./dependency-editing.js";
import { enqueueMany, enqueueOne } from "./enqueue.js";
import { cloudqEventFeed } from "./event-feed.js";
import { importJobs } from "./import.js";
import { RECURRING_INDEXES, ensureIndexes, indexesFor } from "./indexes.js";
import { type CloudqBackendOptions, type ResolvedLayout, resolveLayout } from "./options.js";
import { countJobs, getJob, getJobs, listFilter, pageJobs, queueNames, queuesHolding } from "./reads.js";
import { advanceRecurrence, findRecurrence, putRecurrence, queueRecurrences, removeRecurrence } from "./recurring.js";
import { type ClaimRequest, completeAndClaim, notePaused, reserveJobs } from "./reserve.js";
import { type Store, guarded, traitsOf } from "./store.js";
import { cancel, complete, fail, heartbeat, removeJobs, setProgress } from "./transitions.js";

const MAX_RESERVE_COUNT = 1000;

export function capabilitiesFor(layout: Pick<ResolvedLayout, "completion">): Capabilities {
  const keeps = layout.completion === "mark-deleted";
  return {
    delays: true,
    priorities: true,
    dependencies: true,
    tags: true,
    progress: true,
    uniqueKeys: true,
    leases: true,
    pause: true,
    results: keeps,
    keepsCompleted: keeps,
    customIds: true,
    editing: false,
  };
}

/**
 * A Backend on the Cloudq document layout, sharing `cloudq.jobs` with the Ruby and Node Mongo-era
 * servers. Pass a connection string (the backend owns the client) or a MongoClient you own.
 */
export function createCloudqBackend(options: CloudqBackendOptions): Backend & JobEventFeed & RecurringJobs & DependencyEditing {
  const layout = resolveLayout(options);
  const owned = options.client === undefined;
  const client = options.client ?? new MongoClient(options.url as string);
  const db = client.db(layout.database);
  const store: Store = {
    jobs: db.collection(layout.collection),
    paused: db.collection(layout.pausedCollection),
    recurring: db.collection(layout.recurringCollection),
    claims: db.collection(layout.claimsCollection),
    layout,
    now: options.clock ?? Date.now,
    server: { equalitiesOnly: false },
  };
  let readyOnce: Promise<void> | undefined;

  const ready = (): Promise<void> => {
    readyOnce ??= guarded("connecting", async () => {
      await client.connect();
      Object.assign(store.server, traitsOf(await db.admin().command({ buildInfo: 1 })));
      if (layout.createIndexes) {
        await ensureIndexes(store.jobs, indexesFor(layout.stateField));
        await ensureIndexes(store.recurring, RECURRING_INDEXES);
      }
    }).catch((error: unknown) => {
      readyOnce = undefined;
      throw error;
    });
    return readyOnce;
  };

  /** Every operation waits for ready() and reports an unreachable server naming the operation. */
  const run = async <T>(what: string, operation: () => Promise<T>): Promise<T> => {
    await ready();
    return guarded(what, operation);
  };

  const claimRequest = (reserveOptions: ReserveOptions): ClaimRequest => {
    const count = reserveOptions.count ?? 1;
    const leaseMs = reserveOptions.leaseMs ?? DEFAULT_LEASE_MS;
    if (!Number.isInteger(count) || count < 1 || count > MAX_RESERVE_COUNT) {
      throw new ValidationError(`cloudq-mongo: count must be an integer from 1 to ${MAX_RESERVE_COUNT}`, { count });
    }
    if (!Number.isInteger(leaseMs) || leaseMs <= 0)
      throw new ValidationError("cloudq-mongo: leaseMs must be a positive integer", { leaseMs });
    if (typeof reserveOptions.worker !== "string" || reserveOptions.worker === "") {
      throw new ValidationError("cloudq-mongo: reserve needs a worker name");
    }
    return { worker: reserveOptions.worker, count, leaseMs };
  };

  /** New jobs that sort after every pooled candidate leave the pool as it is (candidates.ts). */
  const added = (results: EnqueueResult[]): AddedJob[] =>
    results.map(({ job }) => ({ runnable: job.state === "waiting", priority: job.priority, createdAt: job.createdAt }));

  return guardBackend("cloudq-mongo", {
    kind: "cloudq-mongo",
    capabilities: capabilitiesFor(layout),
    ...cloudqEventFeed(store, ready),
    ready,
    async close() {
      // Tokens taken ahead for reserves that will not come now are given back at once.
      await releaseAll(store).catch(() => undefined);
      if (owned) await client.close();
    },
    enqueue: (queue, input: EnqueueInput) =>
      run("enqueue", async () => {
        const normalized = normalizeEnqueueInput(input);
        const result = await enqueueOne(store, queue, normalized);
        forgetCandidates(store, queue, added([result]));
        return result;
      }),
    enqueueBulk: async (queue, inputs) => {
      if (!Array.isArray(inputs)) throw new ValidationError("cloudq-mongo: enqueueBulk takes an array of jobs");
      const normalized = inputs.map((input) => normalizeEnqueueInput(input));
      return run("enqueueBulk", async () => {
        const results = await enqueueMany(store, queue, normalized);
        forgetCandidates(store, queue, added(results));
        return results;
      });
    },
    reserve: (queue, reserveOptions) => run("reserve", async () => reserveJobs(store, queue, claimRequest(reserveOptions))),
    heartbeat: (queue, id, beat) => run("heartbeat", () => heartbeat(store, queue, id, beat)),
    complete: (queue, id, done) => run("complete", () => complete(store, queue, id, done)),
    completeAndReserve: (queue, id, done: CompleteOptions, next: ReserveOptions) =>
      run("completeAndReserve", async () => completeAndClaim(store, queue, id, done ?? {}, claimRequest(next))),
    fail: (queue, id, failure) =>
      run("fail", async () => {
        const job = await fail(store, queue, id, failure);
        forgetCandidates(store, queue, added([{ job, created: false }]));
        return job;
      }),
    cancel: (queue, id) => run("cancel", () => cancel(store, queue, id)),
    remove: (queue: string, ids: string[]) => run("remove", () => removeJobs(store, queue, ids)),
    setProgress: (queue, id, progress) => run("setProgress", () => setProgress(store, queue, id, progress)),
    get: (queue, id) => run("get", () => getJob(store, queue, id)),
    getMany: (queue: string, ids: string[]) => run("getMany", () => getJobs(store, queue, ids)),
    dependentsOf: (queue: string, ids: string[]) => run("dependentsOf", () => dependentsOf(store, queue, ids)),
    // A job these release is waiting at once, and may come before the pooled candidates.
    addDependencies: (queue: string, id: string, parents: string[]) =>
      run("addDependencies", async () => {
        const job = await addDependencies(store, queue, id, parents);
        forgetCandidates(store, queue, added([{ job, created: false }]));
        return job;
      }),
    removeDependencies: (queue: string, id: string, parents: string[] | "all") =>
      run("removeDependencies", async () => {
        const job = await removeDependencies(store, queue, id, parents);
        forgetCandidates(store, queue, added([{ job, created: false }]));
        return job;
      }),
    list: (queue, list) => run("list", () => pageJobs(store, listFilter(store, queue, list.state), list.limit, list.cursor)),
    counts: (queue) => run("counts", () => countJobs(store, queue)),
    queues: () => run("queues", () => queueNames(store)),
    queuesHolding: (id: string) => run("queuesHolding", () => queuesHolding(store, id)),
    pause: (queue) =>
      run("pause", async () => {
        await store.paused.updateOne({ _id: queue }, { $setOnInsert: { pausedAt: new Date(store.now()) } }, { upsert: true });
        notePaused(store, queue, true);
      }),
    resume: (queue) =>
      run("resume", async () => {
        await store.paused.deleteOne({ _id: queue });
        notePaused(store, queue, false);
      }),
    isPaused: (queue) => run("isPaused", async () => (await store.paused.countDocuments({ _id: queue }, { limit: 1 })) > 0),
    putRecurrence: (recurrence: Recurrence) => run("putRecurrence", () => putRecurrence(store, recurrence)),
    recurrence: (id: string) => run("recurrence", () => findRecurrence(store, id)),
    recurrences: (queue: string) => run("recurrences", () => queueRecurrences(store, queue)),
    removeRecurrence: (id: string) => run("removeRecurrence", () => removeRecurrence(store, id)),
    advanceRecurrence: (id: string, seen: number, count: number, nextAt: number) =>
      run("advanceRecurrence", () => advanceRecurrence(store, id, seen, count, nextAt)),
    export: (queue, page = {}) => run("export", () => pageJobs(store, { queue }, page.limit, page.cursor)),
    import: (queue, jobs) =>
      run("import", async () => {
        try {
          return await importJobs(store, queue, jobs);
        } finally {
          forgetCandidates(store, queue);
        }
      }),
  });
}
