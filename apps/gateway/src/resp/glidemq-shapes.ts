import { type Job, setNewest } from "@switchyard/core";
import type { Access } from "../auth.js";
import type { NamedBackend } from "../backends.js";
import { GLIDE_STATE_OF } from "../doors/glidemq-jobs.js";
import { RespError, type RespValue } from "./protocol.js";

/*
 * What glide-mq's functions and its key commands share at the door: its keys, the job's hash as
 * glide-mq writes it, the Workers' lock durations, and the errors naming a command.
 */

/** A glide-mq key, `<prefix>:{<queue>}:<rest>`, e.g. `glide:{emails}:job:7`. */
export interface GlideKey {
  queue: string;
  rest: string;
}

export function parseGlideKey(key: string): GlideKey | undefined {
  const match = /^[^{}]*:\{([^{}]+)\}:(.+)$/.exec(key);
  return match ? { queue: match[1] as string, rest: match[2] as string } : undefined;
}

/** What one connection brings to a call: its protocol and the check of its token. */
export interface GlideCallContext {
  protocol: 2 | 3;
  /** Throws AuthError when the connection's token may not do `access` on `queue`. */
  authorize(access: Access, queue: string): void;
  /** Aborted when the connection closes (ends a blocked XREADGROUP). */
  signal: AbortSignal;
  /** Sends the command as it came to a glidemq-valkey store, on this connection's own store connection. */
  forward(store: NamedBackend, args: string[]): Promise<RespValue>;
}

/** A stream entry id for a job handed to a worker: what the worker passes back, unique per door. */
let entrySequence = 0;
export const entryIdFor = (job: Job) => `${job.startedAt ?? Date.now()}-${entrySequence++}`;

function optsOf(job: Job): Record<string, unknown> {
  const opts = job.native.opts;
  return opts !== null && typeof opts === "object" && !Array.isArray(opts) ? (opts as Record<string, unknown>) : {};
}

/**
 * The job's hash as glide-mq's addJob and worker functions write it, in their field order.
 * glide-mq's attemptsMade counts failures; core's attempts count runs, the current one included.
 */
export function glideHash(job: Job): Array<[string, string]> {
  const opts = optsOf(job);
  const running = job.state === "active" || job.state === "completed";
  const fields: Array<[string, string]> = [
    ["id", job.id],
    ["name", job.name],
    ["data", JSON.stringify(job.data)],
    ["opts", JSON.stringify(opts)],
    ["timestamp", String(job.createdAt)],
    ["attemptsMade", String(Math.max(0, job.attempts - (running ? 1 : 0)))],
    ["delay", String(opts.delay ?? 0)],
    ["priority", String(opts.priority ?? 0)],
    ["maxAttempts", String(opts.attempts ?? 0)],
    ["state", GLIDE_STATE_OF[job.state]],
  ];
  if (job.startedAt !== null) fields.push(["processedOn", String(job.startedAt)], ["lastActive", String(job.startedAt)]);
  if (job.error) fields.push(["failedReason", job.error.message]);
  if (job.state === "completed") fields.push(["returnvalue", JSON.stringify(job.result)]);
  if (job.finishedAt !== null && (job.state === "completed" || job.state === "failed" || job.state === "canceled"))
    fields.push(["finishedOn", String(job.finishedAt)]);
  return fields;
}

export const flat = (fields: Array<[string, string]>) => fields.flat();

/** How long a job read by a Worker stays with it, until the Worker says its own: glide-mq's default lockDuration. */
const DEFAULT_LEASE_MS = 30_000;
const REMEMBERED_WORKERS = 10_000;

/**
 * Each Worker's lockDuration, from its stalled check (glidemq_reclaimStalled names the consumer and
 * its lock): the lease of the jobs it claims, so that a job of a Worker that died comes back to
 * another after the lock duration glide-mq would have waited.
 */
export class WorkerLocks {
  readonly #locks = new Map<string, number>();

  /** glidemq_reclaimStalled's ARGV: group, consumer, minIdleMs, maxStalledCount, now, failedKey, broadcast, worker lockDuration. */
  note(args: string[]): void {
    const lock = Number(args[7]) || Number(args[2]);
    if (!Number.isInteger(lock) || lock <= 0) return;
    setNewest(this.#locks, args[1] as string, lock, REMEMBERED_WORKERS);
  }

  leaseOf(consumer: string): number {
    return this.#locks.get(consumer) ?? DEFAULT_LEASE_MS;
  }
}

export const wrongArity = (command: string) => new RespError(`ERR wrong number of arguments for '${command.toLowerCase()}' command`);

export const notServedKey = (command: string, key: string) =>
  new RespError(
    `ERR '${command}' on '${key}' is not served by Switchyard's RESP door: it answers the keys glide-mq's Queue and Worker read, from the backend`,
  );

/** The glide-mq key a command names, checked against the connection's token. */
export function keyOf(command: string, key: string | undefined, context: GlideCallContext, access: Access): GlideKey | RespError {
  if (key === undefined) return wrongArity(command);
  const parsed = parseGlideKey(key);
  if (!parsed) return notServedKey(command, key);
  context.authorize(access, parsed.queue);
  return parsed;
}

export function jobIdOf(key: string): string | undefined {
  const rest = parseGlideKey(key)?.rest;
  return rest?.startsWith("job:") ? rest.slice("job:".length) || undefined : undefined;
}
