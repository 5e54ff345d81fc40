import {
  type Backend,
  BackendUnavailableError,
  type Capabilities,
  type CompleteOptions,
  DEFAULT_LEASE_MS,
  type EnqueueInput,
  type EnqueueResult,
  type ExportOptions,
  type FailOptions,
  type GlideMqFlows,
  type GlideMqQueues,
  type HeartbeatOptions,
  type ImportResult,
  InvalidStateError,
  type Job,
  type JobCounts,
  type JobEventFeed,
  type JobLookup,
  type JobRemoval,
  type Json,
  type ListOptions,
  NotFoundError,
  type Page,
  type RecurringJobs,
  type ReserveOptions,
  emptyCounts,
  guardBackend,
  normalizeEnqueueInput,
} from "@switchyard/core";
import { flatToRecord } from "./codec.js";
import { completionBatches } from "./completion-batches.js";
import { type GlideMqConnection, openClient } from "./connection.js";
import { throwRefusal, toActivated } from "./consumer.js";
import { deadLetters, toDeadLetterQueue } from "./dead-letters.js";
import { enqueueBatches } from "./enqueue-batches.js";
import { glideEventFeed } from "./event-feed.js";
import { glideDags } from "./flow-dag.js";
import { FlowParentIndex } from "./flow-parents.js";
import { glideFlows } from "./flow-tree.js";
import type { AddOutcome } from "./glide-functions.js";
import { glideQueue } from "./glide-queue.js";
import { HeldHashes } from "./held-hashes.js";
import { glideJobLookup } from "./job-lookup.js";
import { CONSUMER_GROUP, DEFAULT_PREFIX, type QueueKeys, queueKeys } from "./keys.js";
import { exportJobs, loadJobs, pageJobs, queueNames } from "./listing.js";
import { toJob, toNewJob } from "./mapping.js";
import { importJobs } from "./migration.js";
import { GlideProducer } from "./producer.js";
import { isPaused, jobCounts, setPaused } from "./queue-admin.js";
import { QueueDirectory } from "./queue-directory.js";
import { type StalledRecoveryOptions, stalledRecovery } from "./recovery.js";
import { glideRecurringJobs } from "./recurring.js";
import { afterScheduledJob, fireDueSchedulers } from "./schedulers.js";
import { type RedisClient, isCluster, loadScripts, runScript } from "./scripts.js";

/** What the backend does, apart from how it connects. */
export interface GlideMqSettings {
  /** Key prefix; glide-mq's default is `glide`. */
  prefix?: string;
  /** Store new jobs' data gzip-compressed (`gz:` + base64), as a glide-mq Queue with compression. */
  compression?: "gzip";
  /** Enqueue through glide-mq's own `FCALL glidemq_addJob`/`glidemq_dedup` where its library is loaded. */
  useGlideFunctions?: boolean;
  /** Recovery of jobs abandoned by consumers without a Switchyard lease (see recovery.ts); false turns it off. */
  stalledRecovery?: StalledRecoveryOptions | false;
  /**
   * The current time in epoch ms (default `Date.now`) that the scripts get (they never read Redis's
   * TIME) for what the job hashes record and for what is due, delayed or expired. The recovery of
   * glide-mq's own stalled consumers keeps real time, as those consumers do.
   */
  clock?: () => number;
}

/** A connection (`url`, cluster seeds or an injected `redis` client) and the settings. */
export type GlideMqBackendOptions = GlideMqConnection & GlideMqSettings;

export const GLIDEMQ_CAPABILITIES: Capabilities = {
  delays: true,
  priorities: true,
  dependencies: true,
  tags: false,
  progress: true,
  uniqueKeys: true,
  leases: true,
  pause: true,
  results: true,
  keepsCompleted: true,
  customIds: true,
  editing: false,
};

type Reply = [string, ...unknown[]];

/** Due job schedulers are fired on a reserve at most this often per queue, as glide-mq's workers tick. */
const SCHEDULER_TICK_MS = 1_000;

/** Switchyard reservers read the stream as consumers of the `workers` group under this name. */
const consumerName = (worker: string) => `switchyard:${worker}`;

/**
 * A Backend over glide-mq's native layout: jobs enqueued here are processed by glide-mq Workers, and
 * jobs glide-mq producers add are reserved here. Leases are Switchyard's own hash fields
 * (`syWorker`, `syLeaseUntil`, `syLeaseStart`, `syEntryId`) and `sy:leases`; no native field changes meaning.
 */
export function createGlideMqBackend(
  options: GlideMqBackendOptions,
): Backend & GlideMqQueues & GlideMqFlows & JobEventFeed & RecurringJobs {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  let owned = false;
  let readying: Promise<RedisClient> | undefined;

  const ready = (): Promise<RedisClient> => {
    readying ??= (async () => {
      let opened: { client: RedisClient; owned: boolean } | undefined;
      try {
        opened = await openClient(options);
        const client = opened.client;
        owned = opened.owned;
        if (isCluster(client) && client.status !== "ready") {
          await new Promise<void>((resolve, reject) => {
            client.once("ready", () => resolve());
            client.once("error", reject);
          });
        }
        await loadScripts(client);
        return client;
      } catch (cause) {
        readying = undefined;
        // Left alone, a client we opened would go on reconnecting forever; the next ready() opens a new one.
        if (opened?.owned) opened.client.disconnect();
        if (cause instanceof BackendUnavailableError) throw cause;
        throw new BackendUnavailableError(`glidemq-valkey: cannot reach Valkey/Redis: ${String(cause)}`, { cause });
      }
    })();
    return readying;
  };
  const directory = new QueueDirectory(async () => queueNames(await ready(), prefix));
  const lookup = glideJobLookup(ready, directory, (queue) => queueKeys(queue, prefix));
  const flowParents = new FlowParentIndex(ready, prefix);
  const keysOf = (queue: string): QueueKeys => {
    lookup.use(queue);
    return queueKeys(queue, prefix);
  };
  const clock = options.clock ?? Date.now;
  const recoverStalled = stalledRecovery(options.stalledRecovery);
  const producing = { prefix, ...(options.compression ? { compression: options.compression } : {}) };
  const schedulerTicks = new Map<string, number>();
  const held = new HeldHashes();
  const completeInBatch = completionBatches(ready, keysOf, consumerName, held, clock);

  /** Fires due schedulers when this process has not looked for SCHEDULER_TICK_MS: reserves here stand in for glide-mq's worker tick. */
  async function tickSchedulers(redis: RedisClient, queue: string, keys: QueueKeys, now: number): Promise<void> {
    if (now - (schedulerTicks.get(queue) ?? 0) < SCHEDULER_TICK_MS) return;
    schedulerTicks.set(queue, now);
    await fireDueSchedulers(redis, queue, keys, prefix, now);
  }

  /** What a glide-mq worker does once a job has ended: reschedule its repeat-after-complete scheduler; a failed one goes to the dead-letter queue. */
  async function afterEnd(redis: RedisClient, queue: string, ended: Record<string, string>, failed: boolean): Promise<void> {
    if (ended.schedulerName) await afterScheduledJob(redis, keysOf(queue), ended.schedulerName, clock());
    if (failed) await toDeadLetterQueue(redis, keysOf, queue, ended, producing);
  }

  async function get(queue: string, id: string): Promise<Job | null> {
    const redis = await ready();
    const [loaded] = await loadJobs(redis, queue, keysOf(queue), [id]);
    return loaded?.job ?? null;
  }

  const producerOf = (redis: RedisClient, queue: string) => {
    lookup.use(queue);
    directory.wrote(queue);
    return new GlideProducer(redis, queue, {
      prefix,
      ...(options.compression ? { compression: options.compression } : {}),
      ...(options.useGlideFunctions ? { useGlideFunctions: true } : {}),
    });
  };
  const addInBatch = enqueueBatches(async (queue, prepared) => producerOf(await ready(), queue).runAdd(prepared));

  /** Each add's job: from what our add script answered, else (glide-mq's own functions answer ids only) read back. */
  async function toResults(redis: RedisClient, queue: string, outcomes: AddOutcome[]): Promise<EnqueueResult[]> {
    const unknown = outcomes.filter((outcome) => !outcome.snapshot).map((outcome) => outcome.id);
    const read = unknown.length > 0 ? await loadJobs(redis, queue, keysOf(queue), unknown) : [];
    let next = 0;
    return outcomes.map((outcome) => {
      let job: Job | undefined;
      if (outcome.snapshot) {
        const { fields, score, deps } = outcome.snapshot;
        if (fields.length > 0) job = toJob(queue, flatToRecord(fields), score, deps);
      } else {
        job = read[next++]?.job;
      }
      if (!job) throw new NotFoundError(`glidemq-valkey: job ${outcome.id} vanished right after enqueue`, { queue, id: outcome.id });
      return { job, created: outcome.status === "created" };
    });
  }

  async function enqueueMany(queue: string, inputs: EnqueueInput[]): Promise<EnqueueResult[]> {
    const redis = await ready();
    const now = clock();
    const jobs = inputs.map((input) => toNewJob(normalizeEnqueueInput(input), now));
    return toResults(redis, queue, await producerOf(redis, queue).addMany(jobs));
  }

  /** One enqueue: it shares a script call with the enqueues of the same queue that come meanwhile. */
  async function enqueueOne(queue: string, input: EnqueueInput): Promise<EnqueueResult> {
    if (options.useGlideFunctions) return (await enqueueMany(queue, [input]))[0] as EnqueueResult;
    const redis = await ready();
    const args = producerOf(redis, queue).prepare(toNewJob(normalizeEnqueueInput(input), clock()));
    return (await toResults(redis, queue, [await addInBatch(queue, args)]))[0] as EnqueueResult;
  }

  return guardBackend("glidemq-valkey", {
    ...glideQueue(ready, keysOf, clock),
    ...glideEventFeed(ready, prefix, directory),
    ...deadLetters(ready, keysOf, producing),
    ...glideFlows(ready, keysOf, producing),
    ...glideDags(ready, keysOf, producing),
    ...glideRecurringJobs(ready, prefix),
    kind: "glidemq-valkey",
    capabilities: GLIDEMQ_CAPABILITIES,

    async ready() {
      await ready();
    },

    async close() {
      if (!readying) return;
      const redis = await readying.catch(() => undefined);
      readying = undefined;
      if (!redis || !owned) return;
      // QUIT needs a live connection; one that is down (or reconnecting) is simply dropped.
      if (redis.status === "ready") await redis.quit().catch(() => redis.disconnect());
      else redis.disconnect();
    },

    enqueue: enqueueOne,

    enqueueBulk: enqueueMany,

    async reserve(queue, reserveOptions: ReserveOptions) {
      const redis = await ready();
      const k = keysOf(queue);
      const now = clock();
      const leaseUntil = now + (reserveOptions.leaseMs ?? DEFAULT_LEASE_MS);
      await recoverStalled(redis, k);
      await tickSchedulers(redis, queue, k, now);
      const reply = (await runScript(
        redis,
        "reserve",
        [k.stream, k.scheduled, k.events, k.priority, k.lifo, k.listActive, k.meta, k.leases, k.failed, k.metricsFailed],
        [now, CONSUMER_GROUP, consumerName(reserveOptions.worker), reserveOptions.count ?? 1, reserveOptions.worker, leaseUntil, "1", "1"],
      )) as unknown[];
      return reply.map((raw) => {
        const { id, hash } = toActivated(raw);
        held.keep(queue, id, hash);
        return toJob(queue, hash, null);
      });
    },

    async heartbeat(queue, id, beat: HeartbeatOptions) {
      const redis = await ready();
      const k = keysOf(queue);
      const now = clock();
      const progress = beat.progress === undefined ? "" : JSON.stringify(beat.progress);
      const reply = (await runScript(
        redis,
        "heartbeat",
        [k.job(id), k.leases, k.events],
        [id, beat.worker, now, now + (beat.leaseMs ?? DEFAULT_LEASE_MS), progress],
      )) as Reply;
      throwRefusal(reply, queue, id);
      const hash = flatToRecord(reply[1]);
      held.refresh(queue, id, hash);
      return toJob(queue, hash, null);
    },

    async setProgress(queue, id, update: { worker?: string; progress: Json }) {
      const redis = await ready();
      const k = keysOf(queue);
      const reply = (await runScript(
        redis,
        "heartbeat",
        [k.job(id), k.leases, k.events],
        [id, update.worker ?? "", clock(), "", JSON.stringify(update.progress)],
      )) as Reply;
      throwRefusal(reply, queue, id);
      const hash = flatToRecord(reply[1]);
      held.refresh(queue, id, hash);
      return toJob(queue, hash, null);
    },

    async completeAndReserve(queue, id, completeOptions: CompleteOptions, next: ReserveOptions) {
      const redis = await ready();
      const k = keysOf(queue);
      await recoverStalled(redis, k);
      await tickSchedulers(redis, queue, k, clock());
      const { completed, ended, next: reserved } = await completeInBatch(queue, id, completeOptions, next);
      await afterEnd(redis, queue, ended, false);
      return { completed, next: reserved };
    },

    async complete(queue, id, completeOptions: CompleteOptions = {}) {
      // Answered from the hash as completion left it (before removeOnComplete's retention): no read-back.
      const { completed, ended } = await completeInBatch(queue, id, completeOptions);
      await afterEnd(await ready(), queue, ended, false);
      return completed;
    },

    async fail(queue, id, failOptions: FailOptions) {
      held.drop(queue, id);
      const redis = await ready();
      const k = keysOf(queue);
      const reply = (await runScript(
        redis,
        "fail",
        [k.stream, k.failed, k.scheduled, k.events, k.job(id), k.metricsFailed, k.listActive],
        [
          id,
          "-",
          failOptions.error.message,
          clock(),
          CONSUMER_GROUP,
          failOptions.worker ?? "",
          failOptions.retry === false ? "0" : "1",
          failOptions.retryDelay === undefined ? "" : String(failOptions.retryDelay),
          Math.random(),
          failOptions.error.group ?? "",
          "1",
          // Core attempts count stalls (expired leases) as handouts too: retry only while those remain.
          "1",
        ],
      )) as Reply;
      throwRefusal(reply, queue, id);
      if (reply[0] !== "retrying") await afterEnd(redis, queue, flatToRecord(reply[1]), true);
      return (await get(queue, id)) ?? toJob(queue, flatToRecord(reply[1]), null);
    },

    async cancel(queue, id) {
      const redis = await ready();
      const k = keysOf(queue);
      const reply = String(
        await runScript(
          redis,
          "revoke",
          [k.job(id), k.stream, k.scheduled, k.failed, k.events, k.priority, k.lifo, k.listActive],
          [id, clock(), CONSUMER_GROUP],
        ),
      );
      if (reply === "NOT_FOUND") throw new NotFoundError(`glidemq-valkey: no job ${id} in queue ${queue}`, { queue, id });
      if (reply.startsWith("INVALID_STATE")) {
        throw new InvalidStateError(`glidemq-valkey: job ${id} is already ${reply.split(":")[1]}`, { queue, id });
      }
    },

    get,

    async remove(queue, ids) {
      const redis = await ready();
      const k = keysOf(queue);
      if (ids.length === 0) return [];
      const keys = [k.events, k.scheduled, k.completed, k.failed, k.priority, k.lifo, k.leases, k.blocked];
      return ((await runScript(redis, "remove", keys, ids)) as unknown[]).map(String);
    },

    async getMany(queue, ids) {
      const redis = await ready();
      return (await loadJobs(redis, queue, keysOf(queue), ids)).map((loaded) => loaded?.job ?? null);
    },

    async list(queue, listOptions: ListOptions): Promise<Page<Job>> {
      const redis = await ready();
      const keys = keysOf(queue);
      if (listOptions.state === "blocked" && listOptions.cursor === undefined) await flowParents.update(redis, queue, keys);
      return pageJobs(redis, queue, keys, listOptions.state, listOptions.limit ?? 100, listOptions.cursor);
    },

    async counts(queue): Promise<JobCounts> {
      const redis = await ready();
      const keys = keysOf(queue);
      const [glide, blocked, prioritized] = await Promise.all([
        jobCounts(redis, keys),
        flowParents.update(redis, queue, keys),
        runScript(redis, "count-prioritized", [keys.scheduled], []),
      ]);
      // glide-mq counts prioritized jobs (in `scheduled` at their band's score) as delayed; get() and
      // list() call them waiting, which they are: core counts follow the job's state.
      const moved = Math.min(Number(prioritized) || 0, glide.delayed);
      return { ...emptyCounts(), ...glide, waiting: glide.waiting + moved, delayed: glide.delayed - moved, blocked };
    },

    async queues() {
      return [...(await directory.names())];
    },

    queuesHolding: lookup.queuesHolding,

    async pause(queue) {
      await setPaused(await ready(), keysOf(queue), true);
    },

    async resume(queue) {
      await setPaused(await ready(), keysOf(queue), false);
    },

    async isPaused(queue) {
      return isPaused(await ready(), keysOf(queue));
    },

    async export(queue, exportOptions: ExportOptions = {}): Promise<Page<Job>> {
      const redis = await ready();
      return exportJobs(redis, queue, keysOf(queue), exportOptions.limit ?? 100, exportOptions.cursor);
    },

    async import(queue, jobs: Job[]): Promise<ImportResult> {
      directory.wrote(queue);
      return importJobs(await ready(), queue, keysOf(queue), jobs);
    },
  } satisfies Backend & GlideMqQueues & JobRemoval & JobLookup & RecurringJobs & { setProgress: NonNullable<Backend["setProgress"]> });
}
