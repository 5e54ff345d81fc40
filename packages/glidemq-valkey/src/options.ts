import { UnsupportedError, ValidationError } from "@switchyard/core";
import { validateJobId } from "./keys.js";

/** The glide-mq `JobOptions` this adapter writes and honours; stored as given in the job's `opts`. */
export interface GlideJobOptions {
  jobId?: string;
  delay?: number;
  /** 0 (default) runs after every prioritized job; 1 is the highest priority, 2048 the lowest. */
  priority?: number;
  lifo?: boolean;
  attempts?: number;
  backoff?: { type: string; delay: number; jitter?: number };
  timeout?: number;
  lockDuration?: number;
  removeOnComplete?: boolean | number | { age?: number; count?: number };
  removeOnFail?: boolean | number | { age?: number; count?: number };
  deduplication?: { id: string; ttl?: number; mode?: "simple" | "throttle" | "debounce" };
  ttl?: number;
  [other: string]: unknown;
}

/** Options glide-mq has that need its group machinery or flows, which this adapter does not run. */
const UNSUPPORTED = ["ordering", "cost", "parent", "parents"] as const;

/** glide-mq's own checks on add, as typed errors. */
export function checkOptions(opts: GlideJobOptions | undefined): void {
  if (!opts) return;
  for (const key of UNSUPPORTED) {
    if (opts[key] !== undefined) throw new UnsupportedError(`glidemq-valkey: opts.${key} is not supported by this adapter`);
  }
  const fail = (message: string) => {
    throw new ValidationError(`glidemq-valkey: ${message}`);
  };
  if (opts.priority !== undefined && !(Number.isInteger(opts.priority) && opts.priority >= 0 && opts.priority <= 2048)) {
    fail("priority must be an integer from 0 to 2048");
  }
  if (opts.delay !== undefined && !(Number.isFinite(opts.delay) && opts.delay >= 0)) fail("delay must be a non-negative number");
  if (opts.ttl !== undefined && !(Number.isFinite(opts.ttl) && opts.ttl >= 0)) fail("ttl must be a non-negative finite number");
  if (opts.attempts !== undefined && !(Number.isInteger(opts.attempts) && opts.attempts >= 0))
    fail("attempts must be a non-negative integer");
  if (
    opts.lockDuration !== undefined &&
    !(Number.isFinite(opts.lockDuration) && opts.lockDuration >= 1000 && opts.lockDuration <= 86_400_000)
  ) {
    fail("lockDuration must be a finite number between 1000 and 86400000");
  }
  if (opts.lifo !== undefined && typeof opts.lifo !== "boolean") fail("lifo must be a boolean");
  if (opts.jobId !== undefined) validateJobId(opts.jobId);
  const dedup = opts.deduplication;
  if (dedup !== undefined) {
    if (typeof dedup.id !== "string" || dedup.id.length === 0) fail("deduplication.id must be a non-empty string");
    if (dedup.mode !== undefined && !["simple", "throttle", "debounce"].includes(dedup.mode))
      fail("deduplication.mode is simple, throttle or debounce");
  }
}
