import { UnsupportedError, ValidationError } from "@switchyard/core";
import { encodeData } from "./codec.js";
import { createdSnapshot } from "./created.js";
import { type AddOutcome, addThroughGlide, glideLibraryLoaded } from "./glide-functions.js";
import { DEFAULT_PREFIX, type QueueKeys, queueKeys } from "./keys.js";
import { type GlideJobOptions, checkOptions } from "./options.js";
import { type RedisClient, runScript } from "./scripts.js";

export interface GlideProducerOptions {
  /** Key prefix; glide-mq's default is `glide`. */
  prefix?: string;
  /** `gzip` stores data as `gz:` + base64(gzip(json)), as a glide-mq Queue with `compression: 'gzip'`. */
  compression?: "gzip";
  /** false skips the `added` event, as glide-mq's `events: false`. */
  events?: boolean;
  /** Milliseconds since the epoch; injectable so recorded traces can be replayed. */
  clock?: () => number;
  /**
   * Add through glide-mq's own `FCALL glidemq_addJob` / `glidemq_dedup` when its library (version 93)
   * is loaded on the server; our scripts otherwise, and for jobs with dependencies or Switchyard fields.
   * Bulk adds then go one call per job, not one atomic call.
   */
  useGlideFunctions?: boolean;
}

export interface NewJob {
  name: string;
  data?: unknown;
  opts?: GlideJobOptions;
  /** Switchyard's own hash fields (names starting with `sy`), written beside the native ones. */
  extraFields?: Record<string, string>;
  /** The `opts` text to store when it differs from `opts` (options a caller gave, stored as given). */
  storedOpts?: string;
  /** Ids of jobs of the same queue this one waits for (glide-mq's DAG layout: `deps:`, `parents:`). */
  dependsOn?: string[];
  /** The enqueue time in ms; the producer's clock when omitted. */
  timestamp?: number;
}

/** glide-mq's FlowProducer input, for a parent whose children are in the same queue. */
export interface FlowJob {
  name: string;
  data?: unknown;
  opts?: GlideJobOptions;
  /** Must be this producer's queue (or omitted): children in other queues live in other slots. */
  queueName?: string;
  children?: FlowJob[];
}

/** At most this many jobs go into one atomic script call, as glide-mq's addBulk chunks by 1000. */
const BULK_CHUNK = 1000;
const ADD_ARGS = 16;

/**
 * The add script's arguments for jobs `from` to `to`, one after another. A plain loop: `Array.flat`
 * costs about 2 µs per job's sixteen arguments in V8, a tenth of what a whole bulk costs this process.
 */
function chunkArguments(prepared: string[][], from: number, to: number): string[] {
  const args: string[] = [];
  for (let i = from; i < to; i++) for (const arg of prepared[i] as string[]) args.push(arg);
  return args;
}

/**
 * Adds jobs to one queue exactly as glide-mq's `Queue.add` / `addBulk` does (glidemq_addJob and
 * glidemq_dedup), with Switchyard's own scripts.
 */
export class GlideProducer {
  readonly keys: QueueKeys;
  private readonly clock: () => number;

  constructor(
    private readonly client: RedisClient,
    readonly queue: string,
    private readonly options: GlideProducerOptions = {},
  ) {
    this.keys = queueKeys(queue, options.prefix ?? DEFAULT_PREFIX);
    this.clock = options.clock ?? Date.now;
  }

  /**
   * The new job's id, or null when a custom id already exists or deduplication skipped it. Adds made
   * in the same event-loop turn share one atomic script call (in call order), as an addBulk would.
   */
  async add(name: string, data?: unknown, opts?: GlideJobOptions): Promise<string | null> {
    if (this.options.useGlideFunctions) {
      const [outcome] = await this.addMany([{ name, data, opts }]);
      return outcome?.status === "created" ? outcome.id : null;
    }
    const args = this.prepare({ name, data, opts });
    const outcome = await new Promise<AddOutcome>((resolve, reject) => {
      this.queued.push({ args, resolve, reject });
      if (this.queued.length === 1) setImmediate(() => void this.flushQueued());
    });
    return outcome.status === "created" ? outcome.id : null;
  }

  /** Ids in order; null where a job was skipped (glide-mq's addBulk leaves those out). */
  async addBulk(jobs: NewJob[]): Promise<Array<string | null>> {
    return (await this.addMany(jobs)).map((o) => (o.status === "created" ? o.id : null));
  }

  private queued: Array<{ args: string[]; resolve: (outcome: AddOutcome) => void; reject: (error: unknown) => void }> = [];

  private async flushQueued(): Promise<void> {
    const batch = this.queued.splice(0, this.queued.length);
    try {
      const outcomes = await this.runAdd(batch.map((item) => item.args));
      batch.forEach((item, i) =>
        outcomes[i] ? item.resolve(outcomes[i]) : item.reject(new Error("glidemq-valkey: add returned no outcome")),
      );
    } catch (error) {
      for (const item of batch) item.reject(error);
    }
  }

  /** Whether the last add went through glide-mq's own functions (see `useGlideFunctions`). */
  usedGlideFunctions = false;
  private glideLoaded: Promise<boolean> | undefined;

  /** Validates every job before writing any; each chunk of 1000 is written atomically. */
  async addMany(jobs: NewJob[]): Promise<AddOutcome[]> {
    const prepared = jobs.map((job) => this.prepare(job));
    const ownFieldsOrDeps = prepared.some((args) => args[11] !== "" || args[15] !== "");
    if (this.options.useGlideFunctions && !ownFieldsOrDeps) {
      this.glideLoaded ??= glideLibraryLoaded(this.client, this.keys);
      this.usedGlideFunctions = await this.glideLoaded;
      if (this.usedGlideFunctions) {
        const outcomes: AddOutcome[] = [];
        for (const args of prepared) outcomes.push(await addThroughGlide(this.client, this.keys, args));
        return outcomes;
      }
    }
    this.usedGlideFunctions = false;
    return this.runAdd(prepared);
  }

  /**
   * Adds jobs whose `prepare` arguments the caller made (and so checked) already; each chunk of 1000
   * is one atomic script call. A job with dependencies refuses its whole chunk when one is missing.
   */
  async runAdd(prepared: string[][]): Promise<AddOutcome[]> {
    const outcomes: AddOutcome[] = [];
    for (let start = 0; start < prepared.length; start += BULK_CHUNK) {
      const args = chunkArguments(prepared, start, Math.min(prepared.length, start + BULK_CHUNK));
      const k = this.keys;
      const reply = (await runScript(
        this.client,
        "add",
        [k.id, k.stream, k.scheduled, k.events, k.lifo, k.priority, k.dedup],
        args,
      )) as Array<[AddOutcome["status"], string, string[]?, (string | null)?, string[]?]>;
      const [first] = reply;
      if (first && String(first[0]) === "missing") {
        throw new ValidationError(`glidemq-valkey: job ${String(first[1])} (a dependency) does not exist in queue ${this.queue}`);
      }
      reply.forEach(([status, id, fields, score, deps], i) => {
        // A job created without dependencies comes back as its id only: its hash is what the arguments say.
        const snapshot = fields
          ? { fields: fields.map(String), score: score == null ? null : String(score), deps: (deps ?? []).map(String) }
          : status === "created"
            ? createdSnapshot(prepared[start + i] as string[], String(id))
            : undefined;
        outcomes.push({ status, id: String(id), ...(snapshot ? { snapshot } : {}) });
      });
    }
    return outcomes;
  }

  /**
   * A parent that runs once all its children have completed (glide-mq's `FlowProducer.add`), ids in
   * creation order; null when a custom id already exists. One level, one queue.
   */
  async addFlow(flow: FlowJob): Promise<{ parent: string; children: string[] } | null> {
    const children = flow.children ?? [];
    for (const node of [flow, ...children]) {
      if (node.queueName !== undefined && node.queueName !== this.queue) {
        throw new UnsupportedError("glidemq-valkey: flows span one queue here (children in other queues live in other cluster slots)");
      }
    }
    if (children.some((child) => (child.children ?? []).length > 0))
      throw new UnsupportedError("glidemq-valkey: nested flows are not supported");
    const [name, data, opts, timestamp, delay, priority, maxAttempts, ttl, customId] = this.prepare(flow);
    const parentArgs = [name, data, opts, timestamp, delay, priority, maxAttempts, ttl, customId, this.queue] as string[];
    const childArgs = children.map((child) => this.prepare({ ...child, timestamp: Number(timestamp) }));
    const k = this.keys;
    const reply = (await runScript(
      this.client,
      "flow",
      [k.id, k.stream, k.scheduled, k.events],
      [...parentArgs, ...childArgs.flat()],
    )) as string[];
    if (reply[0] === "duplicate") return null;
    const [parent, ...ids] = reply.map(String);
    return { parent: parent ?? "", children: ids };
  }

  /** The 16 add.lua arguments of one job, checked (also what a scheduler's tick adds, see schedulers.ts). */
  prepare(job: NewJob): string[] {
    checkOptions(job.opts);
    const opts = job.opts;
    const data = encodeData(job.data, this.options.compression);
    const extra = job.extraFields && Object.keys(job.extraFields).length > 0 ? JSON.stringify(job.extraFields) : "";
    const dedup = opts?.deduplication;
    // glide-mq stores `JSON.stringify(opts)` verbatim, `{}` when none was given.
    const args = [
      job.name,
      data,
      job.storedOpts ?? (opts !== undefined ? JSON.stringify(opts) : "{}"),
      String(job.timestamp ?? this.clock()),
      String(opts?.delay ?? 0),
      String(opts?.priority ?? 0),
      String(opts?.attempts ?? 0),
      String(opts?.ttl ?? 0),
      opts?.jobId ?? "",
      opts?.lifo ? "1" : "0",
      this.options.events === false ? "1" : "0",
      extra,
      dedup?.id ?? "",
      String(dedup?.ttl ?? 0),
      dedup?.mode ?? "simple",
      job.dependsOn && job.dependsOn.length > 0 ? JSON.stringify(job.dependsOn) : "",
    ];
    if (args.length !== ADD_ARGS) throw new Error("glidemq-valkey: add arguments out of step with add.lua");
    return args;
  }
}
