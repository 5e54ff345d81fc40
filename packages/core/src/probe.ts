import type { JobState } from "./job.js";

/**
 * Reads the native store directly (a SQL select, a Redis HGETALL, a Mongo findOne), so that a write
 * and a read that are wrong in matching ways cannot hide behind the adapter's own round trip.
 */
export interface Probe {
  /** The job's state string as the native system stores it, or null when no record is left. */
  nativeState(queue: string, id: string): Promise<string | null>;
  /** How many native job records the queue has, in every state. */
  countJobs(queue: string): Promise<number>;
  /** Which native state strings (null: record removed) each core state may be stored as. */
  expectedStates: Partial<Record<JobState, Array<string | null>>>;
}
