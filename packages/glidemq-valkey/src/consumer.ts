import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { InvalidStateError, LeaseLostError, NotFoundError } from "@switchyard/core";
import { flatToRecord } from "./codec.js";
import { CONSUMER_GROUP, DEFAULT_PREFIX, type QueueKeys, queueKeys } from "./keys.js";
import { type RedisClient, runScript } from "./scripts.js";

export interface GlideConsumerOptions {
  prefix?: string;
  /** The stream consumer name; glide-mq's form `worker-<ms>-<8 hex>` by default. */
  consumerId?: string;
  clock?: () => number;
  /** Our consumers honour `meta.paused` (glide-mq's own workers do not); false claims regardless. */
  honourPause?: boolean;
  /** glide-mq defaults: lockDuration 30000, stalledInterval 30000, maxStalledCount 1. */
  lockDuration?: number;
  stalledInterval?: number;
  maxStalledCount?: number;
}

/** A job claimed by this consumer: `entryId` is '' for jobs taken from the priority or lifo list. */
export interface ActivatedJob {
  id: string;
  entryId: string;
  hash: Record<string, string>;
}

type Reply = [string, ...unknown[]];

export function toActivated(raw: unknown): ActivatedJob {
  const [id, entryId, hash] = raw as [string, string, unknown];
  return { id: String(id), entryId: String(entryId), hash: flatToRecord(hash) };
}

/** Turns a script's refusal into the typed error the rest of Switchyard expects. */
export function throwRefusal(reply: Reply, queue: string, id: string): void {
  const [status, detail] = reply;
  if (status === "NOT_FOUND") throw new NotFoundError(`glidemq-valkey: no job ${id} in queue ${queue}`, { queue, id });
  if (status === "LEASE_LOST") throw new LeaseLostError(`glidemq-valkey: the lease on job ${id} is held by another worker`, { queue, id });
  if (status === "INVALID_STATE") {
    throw new InvalidStateError(`glidemq-valkey: job ${id} is ${String(detail)}, not active`, { queue, id, state: detail });
  }
}

/**
 * The storage side of a glide-mq Worker: the `workers` consumer group, the claim order, activation,
 * heartbeat, completion (optionally fetching the next job in the same call), failure and retry,
 * promotion and stalled-job recovery. It runs no processor; GlideWorker does.
 */
export class GlideConsumer {
  readonly keys: QueueKeys;
  readonly consumerId: string;
  private readonly clock: () => number;
  private readonly startedAt: number;

  constructor(
    private readonly client: RedisClient,
    readonly queue: string,
    private readonly options: GlideConsumerOptions = {},
  ) {
    this.keys = queueKeys(queue, options.prefix ?? DEFAULT_PREFIX);
    this.clock = options.clock ?? Date.now;
    this.consumerId = options.consumerId ?? `worker-${Date.now()}-${randomBytes(4).toString("hex")}`;
    this.startedAt = this.clock();
  }

  get honoursPause(): boolean {
    return this.options.honourPause !== false;
  }

  get lockDuration(): number {
    return this.options.lockDuration ?? 30_000;
  }

  get stalledInterval(): number {
    return this.options.stalledInterval ?? 30_000;
  }

  /** Creates the consumer group from id 0 (jobs added before any worker are consumed) and registers. */
  async init(): Promise<void> {
    try {
      await this.client.xgroup("CREATE", this.keys.stream, CONSUMER_GROUP, "0", "MKSTREAM");
    } catch (error) {
      if (!(error instanceof Error && error.message.includes("BUSYGROUP"))) throw error;
    }
    await this.register(0);
  }

  /** glide-mq's worker registry entry `w:<consumerId>`, expiring after stalledInterval. */
  async register(activeJobs: number): Promise<void> {
    const value = JSON.stringify({ addr: hostname(), pid: process.pid, startedAt: this.startedAt, activeJobs });
    await this.client.set(this.keys.worker(this.consumerId), value, "PX", this.stalledInterval);
  }

  async unregister(): Promise<void> {
    await this.client.del(this.keys.worker(this.consumerId));
  }

  async promote(): Promise<number> {
    const k = this.keys;
    return Number(await runScript(this.client, "promote", [k.scheduled, k.stream, k.events, k.priority, k.lifo], [this.clock()]));
  }

  /** Claims up to `count` jobs: the priority list, then the lifo list, then the stream. */
  async reserve(count = 1): Promise<ActivatedJob[]> {
    const k = this.keys;
    const reply = (await runScript(
      this.client,
      "reserve",
      [k.stream, k.scheduled, k.events, k.priority, k.lifo, k.listActive, k.meta, k.leases, k.failed, k.metricsFailed],
      [this.clock(), CONSUMER_GROUP, this.consumerId, count, "", "", this.honoursPause ? "1" : "0", "0"],
    )) as unknown[];
    return reply.map(toActivated);
  }

  /** Activates an entry this consumer read itself (a blocking XREADGROUP); null when it was skipped. */
  async activate(jobId: string, entryId: string): Promise<ActivatedJob | null> {
    const reply = (await runScript(
      this.client,
      "activate",
      [this.keys.stream],
      [this.clock(), CONSUMER_GROUP, this.consumerId, jobId, entryId],
    )) as unknown[];
    return reply.length > 0 ? toActivated(reply) : null;
  }

  /** Completes the job; with `fetchNext`, claims and returns the next job in the same atomic call. */
  async complete(job: Pick<ActivatedJob, "id" | "entryId">, result: unknown, fetchNext = false): Promise<ActivatedJob | null> {
    const k = this.keys;
    const returnvalue = result === undefined ? "null" : JSON.stringify(result);
    const reply = (await runScript(
      this.client,
      "complete",
      [k.stream, k.completed, k.events, k.job(job.id), k.metricsCompleted, k.listActive],
      [
        job.id,
        job.entryId,
        returnvalue,
        this.clock(),
        CONSUMER_GROUP,
        "",
        fetchNext ? "1" : "0",
        this.consumerId,
        "0",
        this.honoursPause ? "1" : "0",
      ],
    )) as Reply;
    throwRefusal(reply, this.queue, job.id);
    return reply.length > 2 ? toActivated(reply.slice(2)) : null;
  }

  /**
   * Completes several jobs in one atomic call and claims up to `fetchCount` next jobs (the batched
   * complete-and-fetch of a concurrent worker). A job that was taken away meanwhile gets its refusal
   * code in `statuses` instead of 'OK'.
   */
  async completeMany(
    done: Array<{ job: Pick<ActivatedJob, "id" | "entryId">; result: unknown }>,
    fetchCount: number,
  ): Promise<{ statuses: string[]; next: ActivatedJob[] }> {
    const k = this.keys;
    const args: Array<string | number> = [this.clock(), CONSUMER_GROUP, this.consumerId, fetchCount, this.honoursPause ? "1" : "0"];
    for (const { job, result } of done) args.push(job.id, job.entryId, result === undefined ? "null" : JSON.stringify(result));
    const [statuses, next] = (await runScript(
      this.client,
      "complete-many",
      [k.stream, k.completed, k.events, k.metricsCompleted, k.listActive, k.meta],
      args,
    )) as [string[], unknown[]];
    return { statuses: statuses.map(String), next: next.map(toActivated) };
  }

  /**
   * Fails the job: it retries into `scheduled` with its opts.backoff while attemptsMade < opts.attempts,
   * else it is failed for good. `retry: false` is glide-mq's UnrecoverableError.
   */
  async fail(job: Pick<ActivatedJob, "id" | "entryId">, reason: string, retry = true): Promise<"retrying" | "failed"> {
    const k = this.keys;
    const reply = (await runScript(
      this.client,
      "fail",
      [k.stream, k.failed, k.scheduled, k.events, k.job(job.id), k.metricsFailed, k.listActive],
      [job.id, job.entryId, reason, this.clock(), CONSUMER_GROUP, "", retry ? "1" : "0", "", Math.random(), "", "0"],
    )) as Reply;
    throwRefusal(reply, this.queue, job.id);
    return reply[0] === "retrying" ? "retrying" : "failed";
  }

  /** glide-mq's heartbeat: `lastActive` = now, every lockDuration/2 while the processor runs. */
  async heartbeat(jobId: string): Promise<void> {
    await this.client.hset(this.keys.job(jobId), "lastActive", String(this.clock()));
  }

  /**
   * The scheduler's stalled-job recovery: stream jobs through XAUTOCLAIM of entries idle for
   * stalledInterval, and jobs claimed from the priority/lifo lists by a bounded scan (they have no PEL
   * entry). Returns how many jobs it looked at and acted on.
   */
  async reclaimStalled(): Promise<number> {
    const k = this.keys;
    const now = this.clock();
    const maxStalled = this.options.maxStalledCount ?? 1;
    const fromStream = await runScript(
      this.client,
      "reclaim-stalled",
      [k.stream, k.events, k.failed, k.metricsFailed],
      [CONSUMER_GROUP, this.consumerId, this.stalledInterval, maxStalled, now, this.lockDuration],
    );
    const fromLists = await runScript(
      this.client,
      "reclaim-stalled-list",
      [k.stream, k.events, k.failed, k.metricsFailed, k.listActive],
      [this.stalledInterval, maxStalled, now, this.lockDuration],
    );
    return Number(fromStream) + Number(fromLists);
  }
}
