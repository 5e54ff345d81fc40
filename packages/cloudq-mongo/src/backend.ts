import {
  type Backend,
  type Capabilities,
  DEFAULT_LEASE_MS,
  type EnqueueInput,
  type Job,
  type JobEventFeed,
  type ReserveOptions,
  ValidationError,
  guardBackend,
  normalizeEnqueueInput,
} from "@switchyard/core";
import { MongoClient } from "mongodb";
import { forgetCandidates } from "./candidates.js";
import { enqueueMany, enqueueOne } from "./enqueue.js";
import { cloudqEventFeed } from "./event-feed.js";
import { importJobs } from "./import.js";
import { ensureIndexes } from "./indexes.js";
import { type CloudqBackendOptions, type ResolvedLayout, resolveLayout } from "./options.js";
import { countJobs, getJob, getJobs, listFilter, pageJobs, queueNames } from "./reads.js";
import { claimJobs } from "./reserve.js";
import { type Store, guarded } from "./store.js";
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
export function createCloudqBackend(options: CloudqBackendOptions): Backend & JobEventFeed {
  const layout = resolveLayout(options);
  const owned = options.client === undefined;
  const client = options.client ?? new MongoClient(options.url as string);
  const db = client.db(layout.database);
  const store: Store = {
    jobs: db.collection(layout.collection),
    paused: db.collection(layout.pausedCollection),
    claims: db.collection(layout.claimsCollection),
    layout,
  };
  let readyOnce: Promise<void> | undefined;

  const ready = (): Promise<void> => {
    readyOnce ??= guarded("connecting", async () => {
      await client.connect();
      if (layout.createIndexes) await ensureIndexes(store.jobs, layout.stateField);
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

  const reserve = async (queue: string, reserveOptions: ReserveOptions): Promise<Job[]> => {
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
    if (await store.paused.findOne({ _id: queue })) return [];
    return claimJobs(store, queue, { worker: reserveOptions.worker, count, leaseMs });
  };

  return guardBackend("cloudq-mongo", {
    kind: "cloudq-mongo",
    capabilities: capabilitiesFor(layout),
    ...cloudqEventFeed(store, ready),
    ready,
    async close() {
      if (owned) await client.close();
    },
    enqueue: (queue, input: EnqueueInput) =>
      run("enqueue", async () => {
        const normalized = normalizeEnqueueInput(input);
        forgetCandidates(store, queue);
        return enqueueOne(store, queue, normalized);
      }),
    enqueueBulk: async (queue, inputs) => {
      if (!Array.isArray(inputs)) throw new ValidationError("cloudq-mongo: enqueueBulk takes an array of jobs");
      const normalized = inputs.map((input) => normalizeEnqueueInput(input));
      forgetCandidates(store, queue);
      return run("enqueueBulk", () => enqueueMany(store, queue, normalized));
    },
    reserve: (queue, reserveOptions) => run("reserve", () => reserve(queue, reserveOptions)),
    heartbeat: (queue, id, beat) => run("heartbeat", () => heartbeat(store, queue, id, beat)),
    complete: (queue, id, done) => run("complete", () => complete(store, queue, id, done)),
    fail: (queue, id, failure) =>
      run("fail", async () => {
        forgetCandidates(store, queue);
        return fail(store, queue, id, failure);
      }),
    cancel: (queue, id) => run("cancel", () => cancel(store, queue, id)),
    remove: (queue: string, ids: string[]) => run("remove", () => removeJobs(store, queue, ids)),
    setProgress: (queue, id, progress) => run("setProgress", () => setProgress(store, queue, id, progress)),
    get: (queue, id) => run("get", () => getJob(store, queue, id)),
    getMany: (queue: string, ids: string[]) => run("getMany", () => getJobs(store, queue, ids)),
    list: (queue, list) => run("list", () => pageJobs(store, listFilter(store, queue, list.state), list.limit, list.cursor)),
    counts: (queue) => run("counts", () => countJobs(store, queue)),
    queues: () => run("queues", () => queueNames(store)),
    pause: (queue) =>
      run("pause", async () => {
        await store.paused.updateOne({ _id: queue }, { $setOnInsert: { pausedAt: new Date() } }, { upsert: true });
      }),
    resume: (queue) =>
      run("resume", async () => {
        await store.paused.deleteOne({ _id: queue });
      }),
    isPaused: (queue) => run("isPaused", async () => (await store.paused.countDocuments({ _id: queue }, { limit: 1 })) > 0),
    export: (queue, page = {}) => run("export", () => pageJobs(store, { queue }, page.limit, page.cursor)),
    import: (queue, jobs) =>
      run("import", async () => {
        forgetCandidates(store, queue);
        return importJobs(store, queue, jobs);
      }),
  });
}
