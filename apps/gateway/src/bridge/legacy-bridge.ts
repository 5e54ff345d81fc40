import { type Backend, BackendUnavailableError, type Job, LeaseLostError, NotFoundError, SwitchyardError } from "@switchyard/core";

/**
 * The bridge from a legacy Worker Queue `jobs` table to any backend. The source is a workerqueue-sql
 * backend over that table, so the bridge claims `pending` rows the way Switchyard's reservers do:
 * the row reads `processing` while the job runs elsewhere, and `complete` or `error` (with `details`)
 * once it has finished there, which is what the Rails app that INSERTed it reads.
 *
 * Exactly once across crashes: a row's job on the target has an id made from the row's, so
 * claiming, enqueueing and writing the outcome back can each be repeated after a `kill -9`. A
 * restarted bridge first takes back the rows its own lease still holds and enqueues them again,
 * which finds the job the last run enqueued (finished or not) instead of adding a second one.
 */
export interface LegacyBridgeOptions {
  /** A workerqueue-sql backend over the legacy table. */
  source: Backend;
  target: Backend;
  /** The source queue: workerqueue-sql's default queue holds the rows a legacy producer INSERTs. */
  queue: string;
  targetQueue: string;
  /** The lease holder; the same name across restarts, so a restarted bridge recognises its rows. */
  worker: string;
  /**
   * Put before a row's id to make its job's id on the target, the same on every run. qless's jids
   * are global, so two legacy tables bridged onto one qless store need different prefixes.
   */
  idPrefix: string;
  /** Rows claimed per look. */
  batchSize: number;
  /** How long a claimed row stays with the bridge before another reserver may take it. */
  leaseMs: number;
  onEvent?: (event: BridgeEvent) => void;
}

export type BridgeEvent =
  | { type: "enqueued"; row: string; targetId: string; created: boolean }
  | { type: "finished"; row: string; targetId: string; status: "complete" | "error" }
  | { type: "refused"; row: string; reason: string };

const FINISHED: ReadonlySet<Job["state"]> = new Set(["completed", "failed", "canceled"]);

/** What a target must do for the bridge to hand each row out exactly once. */
export function checkTarget(target: Backend): void {
  const { customIds, keepsCompleted } = target.capabilities;
  if (!customIds || !keepsCompleted) {
    throw new Error(
      `the target (${target.kind}) must take job ids (customIds) and keep finished jobs (keepsCompleted) for the bridge to learn each outcome exactly once`,
    );
  }
}

export class LegacyBridge {
  /** Rows the bridge holds, by row id: their job is on the target until it finishes. */
  readonly #inFlight = new Map<string, string>();
  #resumed = false;

  constructor(private readonly options: LegacyBridgeOptions) {
    checkTarget(options.target);
  }

  inFlight(): number {
    return this.#inFlight.size;
  }

  /** One pass: take back the rows of an earlier run (first pass only), claim new rows, write back finished ones. */
  async tick(): Promise<void> {
    if (!this.#resumed) {
      await this.#resumeOwnRows();
      this.#resumed = true;
    }
    const { source, queue, worker, batchSize, leaseMs } = this.options;
    const claimed = await source.reserve(queue, { worker, count: batchSize, leaseMs });
    for (const row of claimed) await this.#hand(row);
    for (const [row, targetId] of [...this.#inFlight]) await this.#writeBack(row, targetId);
  }

  /** The rows still leased to this bridge's name: a run that died left them `processing`. */
  async #resumeOwnRows(): Promise<void> {
    const { source, queue, worker } = this.options;
    let cursor: string | undefined;
    do {
      const page = await source.list(queue, { state: "active", limit: 500, ...(cursor ? { cursor } : {}) });
      for (const row of page.items) if (row.lease?.worker === worker) await this.#hand(row);
      cursor = page.cursor ?? undefined;
    } while (cursor);
  }

  /** Enqueues the row's job on the target (or finds the one an earlier run enqueued). */
  async #hand(row: Job): Promise<void> {
    const { target, targetQueue, onEvent } = this.options;
    const targetId = `${this.options.idPrefix}${row.id}`;
    try {
      const { created } = await target.enqueue(targetQueue, {
        id: targetId,
        name: row.name,
        data: row.data,
        priority: row.priority,
        ...taskableOf(row),
      });
      this.#inFlight.set(row.id, targetId);
      onEvent?.({ type: "enqueued", row: row.id, targetId, created });
    } catch (error) {
      if (!isRefusal(error)) throw error;
      // A row the target cannot take (a name it refuses, data it cannot hold) ends `error`, saying why.
      const reason = `switchyard bridge: the target refused this job: ${(error as Error).message}`;
      await this.#finishRow(row.id, { status: "error", message: reason });
      onEvent?.({ type: "refused", row: row.id, reason });
    }
  }

  async #writeBack(rowId: string, targetId: string): Promise<void> {
    const { target, targetQueue, onEvent } = this.options;
    const job = await target.get(targetQueue, targetId);
    if (!job || !FINISHED.has(job.state)) return;
    const status = job.state === "completed" ? "complete" : "error";
    const message = job.error?.message ?? (job.state === "canceled" ? "canceled on the target" : "failed on the target");
    await this.#finishRow(rowId, status === "complete" ? { status } : { status, message });
    this.#inFlight.delete(rowId);
    onEvent?.({ type: "finished", row: rowId, targetId, status });
  }

  async #finishRow(rowId: string, outcome: { status: "complete" } | { status: "error"; message: string }): Promise<void> {
    const { source, queue, worker } = this.options;
    try {
      if (outcome.status === "complete") await source.complete(queue, rowId, { worker });
      else await source.fail(queue, rowId, { worker, retry: false, error: { message: outcome.message } });
    } catch (error) {
      // The lease ran out and another reserver has the row now, or the row is gone: not ours to write.
      if (!(error instanceof LeaseLostError || error instanceof NotFoundError)) throw error;
      this.#inFlight.delete(rowId);
    }
  }
}

/** The row's Rails record (`taskable_type`, `taskable_id`), for the target's workers to read in `native.workerqueue`. */
function taskableOf(row: Job): { native?: { workerqueue: Record<string, unknown> } } {
  const own = (row.native.workerqueue ?? {}) as Record<string, unknown>;
  const taskable = Object.fromEntries(Object.entries(own).filter(([key]) => key === "taskable_type" || key === "taskable_id"));
  return Object.keys(taskable).length > 0 ? { native: { workerqueue: taskable } } : {};
}

/** A typed refusal of this one job (bad input, a capability the target lacks); a store that is down is not one. */
function isRefusal(error: unknown): boolean {
  return error instanceof SwitchyardError && !(error instanceof BackendUnavailableError);
}
