import type { Redis } from "ioredis";
import { parseStored } from "../../src/codec.js";
import { type ActivatedJob, GlideConsumer, type GlideConsumerOptions } from "../../src/consumer.js";

/** What a recorded processor did with one job. */
export type Outcome = { result: unknown } | { error: string } | "hold";
export type Processor = (job: { id: string; name: string; data: unknown; attemptsMade: number }) => Outcome;

/**
 * Drives a GlideConsumer the way a glide-mq Worker (concurrency 1) drives glide-mq's functions, one
 * deterministic step at a time: a scheduler tick promotes (and reclaims stalled jobs), a poll claims
 * a job, a completion claims the next one in the same call, a failure goes back to polling.
 */
export class ReplayWorker {
  readonly consumer: GlideConsumer;
  readonly processed: string[] = [];
  held: ActivatedJob | null = null;

  constructor(
    redis: Redis,
    queue: string,
    private readonly processor: Processor,
    options: GlideConsumerOptions,
  ) {
    this.consumer = new GlideConsumer(redis, queue, options);
  }

  async start(): Promise<void> {
    await this.consumer.init();
    await this.tick();
  }

  /** A scheduler tick (promotion, stalled recovery), then processing until nothing is claimable. */
  async tick(): Promise<void> {
    await this.consumer.promote();
    await this.consumer.reclaimStalled();
    await this.drain();
  }

  async drain(): Promise<void> {
    if (this.held) return;
    let job: ActivatedJob | null = (await this.consumer.reserve(1))[0] ?? null;
    while (job) {
      job = await this.run(job);
      if (!job && !this.held) job = (await this.consumer.reserve(1))[0] ?? null;
    }
  }

  /** Completes the held job with `result` and carries on. */
  async release(result: unknown): Promise<void> {
    const held = this.held;
    if (!held) throw new Error("no held job");
    this.held = null;
    let next = await this.consumer.complete(held, result, true);
    while (next) next = await this.run(next);
    await this.drain();
  }

  async close(): Promise<void> {
    await this.consumer.unregister();
  }

  /** Processes one job; returns the next job when completion fetched one. */
  private async run(job: ActivatedJob): Promise<ActivatedJob | null> {
    this.processed.push(job.id);
    const outcome = this.processor({
      id: job.id,
      name: job.hash.name ?? "",
      data: parseStored(job.hash.data),
      attemptsMade: Number(job.hash.attemptsMade ?? 0),
    });
    if (outcome === "hold") {
      this.held = job;
      return null;
    }
    if ("error" in outcome) {
      await this.consumer.fail(job, outcome.error);
      return null;
    }
    return this.consumer.complete(job, outcome.result, true);
  }
}
