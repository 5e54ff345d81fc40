import type { Backend } from "./backend.js";
import type { EnqueueInput, Job } from "./job.js";

/**
 * Optional interfaces: what only some systems have. A door that needs one discovers it on the
 * backend with its guard and answers 501 with the reason when it is absent; no door imports an
 * adapter package.
 */

/** A reply of a qless command as Redis returns it: bulk strings, integers, nil, and lists of those. */
export type QlessReply = string | number | null | QlessReply[];

/** A qless command refused by qless's own rules; the message is qless's, for a qless client to show. */
export class QlessCommandError extends Error {
  readonly command: string;
  constructor(command: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "QlessCommandError";
    this.command = command;
  }
}

/**
 * qless's command API, run verbatim (`put`, `pop`, `heartbeat`, `complete`... with qless's
 * argument order), as on a store that holds the qless layout. A qless refusal rejects with
 * QlessCommandError; a store failure with the core's typed errors.
 */
export interface QlessCommands {
  qless(command: string, now: number | string, ...args: Array<string | number>): Promise<QlessReply>;
}

export function hasQlessCommands(backend: Backend): backend is Backend & QlessCommands {
  return typeof (backend as Partial<QlessCommands>).qless === "function";
}

/**
 * Changing a job after it was enqueued, where the store can: what qless's `priority`, `tag add`/
 * `tag remove` and a re-`put` of an existing jid do. A missing job is a NotFoundError.
 */
export interface JobEditing {
  /** Sets the priority (the core scale); a waiting job takes its new place in the claim order. */
  setPriority(queue: string, id: string, priority: number): Promise<Job>;
  /** Replaces the job's tags. */
  setTags(queue: string, id: string, tags: string[]): Promise<Job>;
  /**
   * Puts the job with this id in `queue` again as new, as qless re-puts a jid: name, data and
   * options from `input`, waiting (or delayed), no lease, result, error or attempts; whatever state
   * it was in, a worker holding it loses its lease.
   */
  replace(queue: string, id: string, input: EnqueueInput): Promise<Job>;
}

export function hasJobEditing(backend: Backend): backend is Backend & JobEditing {
  const editing = backend as Partial<JobEditing>;
  return typeof editing.setPriority === "function" && typeof editing.setTags === "function" && typeof editing.replace === "function";
}
