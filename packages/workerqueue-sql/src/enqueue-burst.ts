import { type EnqueueResult, type NormalizedEnqueueInput, runAtOf } from "@switchyard/core";
import type { Condition } from "./claim.js";
import type { JobRow } from "./columns.js";
import { typedError } from "./db-errors.js";
import { rowOfId } from "./lookup.js";
import type { Store } from "./options.js";
import { enqueueRow, rowToJob } from "./row.js";
import { rowIdOf } from "./where.js";

/** What a burst's writer made of each row: the stored row (or the one already holding its id), or the constraint that refused it alone. */
export type BurstOutcome = { row: JobRow; created: boolean } | { error: unknown };

/** A row to write; `find`: the read of the row already holding its caller-chosen id (written only when none does). */
export interface BurstItem {
  row: Record<string, unknown>;
  find?: Condition;
}

/**
 * Writes a burst's rows, answering one outcome per row in order. It throws when nothing of the burst
 * was written: `retryEach` says whether each job may then take the ordinary path (the write failed
 * before anything was stored) or must get the error (a lost connection: it may have been committed).
 * `takesIds`: whether it writes jobs with a caller-chosen id too, each looked up first (items with
 * `find`): in the same transaction on SQLite; on MariaDB just before, the unique index (sy_queue,
 * sy_job_id) refusing the insert whole if another process wrote the id meanwhile.
 */
export interface BurstWriter {
  readonly takesIds: boolean;
  /** Whether the server takes bursts (false: every job takes the ordinary path). */
  canWrite(): boolean;
  write(items: BurstItem[]): Promise<BurstOutcome[]>;
  retryEach(error: unknown): boolean;
}

interface Waiting {
  queue: string;
  input: NormalizedEnqueueInput;
  /** The backend's clock when the caller asked (a burst may mix callers of different clocks). */
  now: number;
  resolve: (result: EnqueueResult) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit of enqueues: those without unique key made in the same turn of the event loop (on
 * PostgreSQL only those without id either: its ids go in groups of their own) are written together
 * by the dialect's writer (one transaction on SQLite, where an id is looked up in it, one multi-row
 * INSERT ... RETURNING on PostgreSQL and MariaDB, MariaDB's ids looked up first in one script), so a
 * burst of them (a gateway under load, a qless client's puts) pays for one commit instead of one each.
 * Nothing is answered before the write, so an acknowledged job is stored as before; a lone enqueue
 * waits only for the end of the turn it arrived in.
 */
export class EnqueueBurst {
  private waiting: Waiting[] = [];

  /**
   * @param fallback the ordinary path (knex, retries, typed errors), which each job of a burst takes
   *   when the writer says the burst as a whole was not written.
   */
  constructor(
    private readonly store: Store,
    private readonly writer: BurstWriter,
    private readonly fallback: (queue: string, input: NormalizedEnqueueInput) => Promise<EnqueueResult>,
  ) {}

  /**
   * Whether a job goes in a burst: one without id, unique key or dependencies (nothing to look up
   * or mark first) or, when the writer looks ids up itself, one with an id but no key.
   * An id that spells a row id takes the ordinary path, which also moves the table's id counter
   * past it (sequence.ts).
   */
  takes(input: NormalizedEnqueueInput): boolean {
    if (!this.writer.canWrite()) return false;
    if (input.uniqueKey !== undefined || input.dependsOn.length > 0) return false;
    return input.id === undefined || (this.writer.takesIds && rowIdOf(input.id) === null);
  }

  enqueue(queue: string, input: NormalizedEnqueueInput): Promise<EnqueueResult> {
    return new Promise((resolve, reject) => {
      if (this.waiting.length === 0) setImmediate(() => void this.flush());
      this.waiting.push({ queue, input, now: this.store.now(), resolve, reject });
    });
  }

  private async flush(): Promise<void> {
    // A job whose row cannot be made (a value out of range) is refused alone, before anything is written.
    const burst: Array<Waiting & BurstItem> = [];
    for (const item of this.waiting) {
      try {
        const row = enqueueRow(this.store, item.queue, item.input, runAtOf(item.input, item.now), item.now);
        const id = item.input.id;
        burst.push({ ...item, row, ...(id !== undefined ? { find: rowOfId(this.store, item.queue, id) } : {}) });
      } catch (error) {
        item.reject(error);
      }
    }
    this.waiting = [];
    if (burst.length === 0) return;
    let outcomes: BurstOutcome[];
    try {
      outcomes = await this.writer.write(burst);
    } catch (error) {
      for (const item of burst) {
        if (this.writer.retryEach(error)) this.fallback(item.queue, item.input).then(item.resolve, item.reject);
        else item.reject(typedError("enqueue", error));
      }
      return;
    }
    burst.forEach((item, i) => {
      const outcome = outcomes[i] as BurstOutcome;
      if ("error" in outcome) item.reject(typedError("enqueue", outcome.error));
      else item.resolve({ job: rowToJob(this.store, outcome.row, item.now), created: outcome.created });
    });
  }
}
