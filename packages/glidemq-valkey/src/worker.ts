import { parseStored } from "./codec.js";
import { type ActivatedJob, GlideConsumer, type GlideConsumerOptions } from "./consumer.js";
import { CONSUMER_GROUP } from "./keys.js";
import type { RedisClient } from "./scripts.js";

/** What a processor sees of a claimed job. */
export interface ProcessedJob {
  id: string;
  name: string;
  data: unknown;
  /** Failures so far (glide-mq's `attemptsMade`). */
  attemptsMade: number;
  hash: Record<string, string>;
}

export type Processor = (job: ProcessedJob) => Promise<unknown> | unknown;

export interface GlideWorkerOptions extends GlideConsumerOptions {
  /** Jobs processed at once; default 1. */
  concurrency?: number;
  /** How often due delayed and retrying jobs are promoted; glide-mq's default is 5000 ms. */
  promotionInterval?: number;
  /** How long an idle worker blocks on the stream before looking at the lists again; default 5000 ms. */
  blockTimeout?: number;
}

/** A processor that throws an error with this name fails the job at once, as glide-mq's UnrecoverableError. */
export const UNRECOVERABLE = "UnrecoverableError";

/**
 * A processing loop over GlideConsumer that behaves like glide-mq's Worker: it claims with the
 * native order, completes and claims the next job in one call, heartbeats `lastActive` every
 * lockDuration/2, promotes due jobs and recovers stalled ones on a timer, and blocks on the stream
 * (XREADGROUP through its own connection) when idle. Unlike glide-mq's Worker it honours meta.paused.
 */
export class GlideWorker {
  readonly consumer: GlideConsumer;
  private readonly concurrency: number;
  private running = false;
  private active = 0;
  private loop: Promise<void> | undefined;
  private blocking: RedisClient | undefined;
  private timers: NodeJS.Timeout[] = [];
  private wake: (() => void) | undefined;
  /** Completions waiting for the next batched complete-and-fetch call. */
  private finished: Array<{ job: ActivatedJob; result: unknown; resolve: (next: ActivatedJob | null) => void }> = [];
  private flushScheduled = false;

  constructor(
    private readonly client: RedisClient,
    readonly queue: string,
    private readonly processor: Processor,
    private readonly options: GlideWorkerOptions = {},
  ) {
    this.consumer = new GlideConsumer(client, queue, options);
    this.concurrency = Math.max(1, options.concurrency ?? 1);
  }

  async start(): Promise<void> {
    if (this.running) return;
    await this.consumer.init();
    this.running = true;
    this.blocking = this.client.duplicate() as RedisClient;
    const every = (ms: number, task: () => Promise<unknown>) => {
      const timer = setInterval(() => void task().catch(() => undefined), ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(this.options.promotionInterval ?? 5000, () => this.consumer.promote());
    every(this.consumer.stalledInterval, () => this.consumer.reclaimStalled());
    every(Math.max(1000, this.consumer.stalledInterval / 2), () => this.consumer.register(this.active));
    await this.consumer.promote();
    await this.consumer.reclaimStalled();
    this.loop = this.dispatch();
  }

  /** Stops claiming, waits for the jobs in hand, and leaves the worker registry. */
  async close(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    this.blocking?.disconnect();
    this.wake?.();
    await this.loop;
    while (this.active > 0) await new Promise<void>((resolve) => setTimeout(resolve, 5));
    await this.consumer.unregister();
  }

  private async dispatch(): Promise<void> {
    while (this.running) {
      const free = this.concurrency - this.active;
      if (free <= 0) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        continue;
      }
      try {
        const jobs = await this.consumer.reserve(free);
        if (jobs.length > 0) {
          for (const job of jobs) this.launch(job);
          continue;
        }
        await this.waitForWork(free);
      } catch {
        // A lost connection or a closing worker: try again shortly unless we are stopping.
        if (!this.running) return;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  /** Blocks on the stream for new entries; while paused, sleeps instead of claiming anything. */
  private async waitForWork(free: number): Promise<void> {
    if (this.consumer.honoursPause && (await this.client.hget(this.consumer.keys.meta, "paused")) === "1") {
      await new Promise((resolve) => setTimeout(resolve, Math.min(1000, this.options.blockTimeout ?? 1000)));
      return;
    }
    const blocking = this.blocking;
    if (!blocking) return;
    const reply = (await blocking
      .xreadgroup(
        "GROUP",
        CONSUMER_GROUP,
        this.consumer.consumerId,
        "COUNT",
        free,
        "BLOCK",
        this.options.blockTimeout ?? 5000,
        "STREAMS",
        this.consumer.keys.stream,
        ">",
      )
      .catch(() => null)) as Array<[string, Array<[string, string[]]>]> | null;
    for (const [entryId, fields] of reply?.[0]?.[1] ?? []) {
      const jobId = fields[fields.indexOf("jobId") + 1];
      if (!jobId) continue;
      const job = await this.consumer.activate(jobId, entryId);
      if (job) this.launch(job);
    }
  }

  private launch(first: ActivatedJob): void {
    this.active++;
    void (async () => {
      let job: ActivatedJob | null = first;
      while (job) job = await this.process(job, this.running);
      this.active--;
      this.wake?.();
      this.wake = undefined;
    })();
  }

  /**
   * Completions that finish in the same turn of the event loop go to Redis in one call, which also
   * claims a next job for each: one round trip per batch instead of per job. Alone, a job completes
   * exactly as glide-mq's completeAndFetchNext would.
   */
  private completeBatched(job: ActivatedJob, result: unknown, fetchNext: boolean): Promise<ActivatedJob | null> {
    if (this.concurrency === 1) return this.consumer.complete(job, result, fetchNext);
    return new Promise((resolve) => {
      this.finished.push({ job, result, resolve });
      if (this.flushScheduled) return;
      this.flushScheduled = true;
      setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    this.flushScheduled = false;
    const batch = this.finished.splice(0, this.finished.length);
    if (batch.length === 0) return;
    try {
      const { next } = await this.consumer.completeMany(batch, this.running ? batch.length : 0);
      batch.forEach((item, i) => item.resolve(next[i] ?? null));
    } catch {
      for (const item of batch) item.resolve(null);
    }
  }

  /** Runs the processor; on success completes and returns the next job claimed in the same call. */
  private async process(job: ActivatedJob, fetchNext: boolean): Promise<ActivatedJob | null> {
    const opts = parseStored(job.hash.opts) as { lockDuration?: unknown; timeout?: unknown } | null;
    // The job's own lockDuration (1000..86400000) paces its heartbeat, as in glide-mq.
    const ownLock = Number(opts?.lockDuration);
    const lockDuration = ownLock >= 1000 && ownLock <= 86_400_000 ? ownLock : this.consumer.lockDuration;
    const heartbeat = setInterval(() => void this.consumer.heartbeat(job.id).catch(() => undefined), lockDuration / 2);
    heartbeat.unref();
    try {
      let result: unknown;
      try {
        result = await this.runProcessor(job, Number(opts?.timeout) || 0);
      } catch (error) {
        const failure = error instanceof Error ? error : new Error(String(error));
        await this.consumer.fail(job, failure.message, failure.name !== UNRECOVERABLE);
        return null;
      }
      return await this.completeBatched(job, result, fetchNext);
    } catch {
      return null; // the job was taken away (cancelled, reclaimed): nothing left to do with it
    } finally {
      clearInterval(heartbeat);
    }
  }

  /** The processor, failing with glide-mq's "Job timeout exceeded" once `opts.timeout` ms have passed. */
  private async runProcessor(job: ActivatedJob, timeoutMs: number): Promise<unknown> {
    const run = Promise.resolve(
      this.processor({
        id: job.id,
        name: job.hash.name ?? "",
        data: parseStored(job.hash.data),
        attemptsMade: Number(job.hash.attemptsMade ?? 0),
        hash: job.hash,
      }),
    );
    if (timeoutMs <= 0) return run;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        run,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error("Job timeout exceeded")), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}
