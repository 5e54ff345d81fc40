import { randomUUID } from "node:crypto";
import { type JobState, type MigrationReport, ValidationError, migrateQueue, verifyMigration } from "@switchyard/core";
import type { NamedBackend } from "../backends.js";
import { moveWhatArrives } from "./bridge.js";
import { queuesToMove } from "./command.js";

/**
 * Migrations and bridges the gateway runs itself (started through `POST /v1/migrations`), so their
 * progress is in /metrics and on the dashboard. They run between configured backends, with the same
 * rules as `switchyard migrate` and `switchyard bridge` (core's migrateQueue); nothing is written
 * to a checkpoint file: a run stopped with the gateway is started again (a copy skips what the
 * target already holds, a move finds what is left).
 */

export interface MigrationRunInput {
  kind: "migrate" | "bridge";
  from: string;
  to: string;
  /** A queue name or pattern (`*`); every queue of the source when left out. */
  queue?: string;
  /** Copy into this queue instead (one queue only). */
  targetQueue?: string;
  states?: JobState[];
  /** `migrate` only: copy (default) or move; a bridge always moves. */
  mode?: "copy" | "move";
  /** `migrate` with mode move: seconds to wait at the end for active jobs to finish, to move them too. */
  waitActive?: number;
  idPrefix?: string;
  batchSize?: number;
  /** `bridge` only: how long to wait between passes that found nothing. */
  intervalMs?: number;
}

export interface QueueProgress {
  queue: string;
  state: "waiting" | "running" | "done" | "failed";
  /** Jobs read from the source and written to (or already held by) the target. */
  copied: number;
  /** The source's count when the queue started (null for a bridge, whose queues keep filling). */
  total: number | null;
  /** A copy's check after the fact: the target holds every job as the source does. */
  verified?: boolean;
}

export interface MigrationRun {
  id: string;
  kind: "migrate" | "bridge";
  from: string;
  to: string;
  state: "running" | "finished" | "failed" | "stopped";
  startedAt: number;
  finishedAt?: number;
  copied: number;
  total: number | null;
  error?: string;
  queues: QueueProgress[];
}

/** How many finished runs are remembered for the list. */
const KEPT_FINISHED = 50;

export class MigrationRuns {
  readonly #runs = new Map<string, { run: MigrationRun; stop: AbortController; done: Promise<void> }>();

  constructor(private readonly backends: Map<string, NamedBackend>) {}

  /** Starts a run; bad input (an unknown backend, a rename of several queues) throws ValidationError. */
  start(input: MigrationRunInput): MigrationRun {
    const source = this.#backend(input.from, "from");
    const target = this.#backend(input.to, "to");
    if (input.from === input.to && (input.targetQueue === undefined || input.targetQueue === input.queue))
      throw new ValidationError(`from and to are both "${input.from}": give a targetQueue to copy within one backend`);
    if (input.targetQueue !== undefined && (input.queue === undefined || input.queue.includes("*")))
      throw new ValidationError("targetQueue renames one queue: give that queue as queue");
    if (input.waitActive !== undefined && (input.kind !== "migrate" || input.mode !== "move"))
      throw new ValidationError('waitActive waits for active jobs to move them: it goes with kind "migrate" and mode "move"');
    const run: MigrationRun = {
      id: randomUUID(),
      kind: input.kind,
      from: input.from,
      to: input.to,
      state: "running",
      startedAt: Date.now(),
      copied: 0,
      total: input.kind === "bridge" ? null : 0,
      queues: [],
    };
    const stop = new AbortController();
    const work =
      input.kind === "bridge"
        ? this.#bridge(run, input, source, target, stop.signal)
        : this.#migrate(run, input, source, target, stop.signal);
    const done = work
      .then(
        () => {
          run.state = stop.signal.aborted ? "stopped" : "finished";
        },
        (error: Error) => {
          run.state = "failed";
          run.error = error.message;
        },
      )
      .then(() => {
        run.finishedAt = Date.now();
        this.#forgetOld();
      });
    this.#runs.set(run.id, { run, stop, done });
    return run;
  }

  list(): MigrationRun[] {
    return [...this.#runs.values()].map(({ run }) => run).sort((a, b) => b.startedAt - a.startedAt);
  }

  get(id: string): MigrationRun | undefined {
    return this.#runs.get(id)?.run;
  }

  /** Stops a run after the page in hand; resolves with the run once it has stopped. */
  async stop(id: string): Promise<MigrationRun | undefined> {
    const entry = this.#runs.get(id);
    if (!entry) return undefined;
    entry.stop.abort();
    await entry.done;
    return entry.run;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#runs.keys()].map((id) => this.stop(id)));
  }

  #backend(name: string, role: string) {
    const named = this.backends.get(name);
    if (!named) throw new ValidationError(`${role}: no backend is named "${name}" (configured: ${[...this.backends.keys()].join(", ")})`);
    return named.backend;
  }

  async #migrate(
    run: MigrationRun,
    input: MigrationRunInput,
    source: NamedBackend["backend"],
    target: NamedBackend["backend"],
    signal: AbortSignal,
  ) {
    const queues = await queuesToMove(source, input.queue);
    for (const queue of queues) run.queues.push({ queue, state: "waiting", copied: 0, total: null });
    for (const progress of run.queues) {
      if (signal.aborted) return;
      const counts = await source.counts(progress.queue);
      progress.total = Object.values(counts).reduce((sum, n) => sum + n, 0);
      run.total = (run.total ?? 0) + progress.total;
      progress.state = "running";
      const targetQueue = input.targetQueue ?? progress.queue;
      const report: MigrationReport = await migrateQueue({
        from: source,
        to: target,
        queue: progress.queue,
        targetQueue,
        mode: input.mode ?? "copy",
        signal,
        ...(input.waitActive ? { waitActiveMs: input.waitActive * 1000 } : {}),
        ...(input.batchSize ? { batchSize: input.batchSize } : {}),
        ...(input.states ? { states: input.states } : {}),
        ...(input.idPrefix ? { idPrefix: input.idPrefix } : {}),
        onProgress: (page) => this.#count(run, progress, page.imported + page.skipped - progress.copied),
      }).catch((error: Error) => {
        progress.state = "failed";
        throw error;
      });
      if ((input.mode ?? "copy") === "copy" && !signal.aborted) {
        const check = await verifyMigration(source, target, report, {
          queue: progress.queue,
          targetQueue,
          ...(input.states ? { states: input.states } : {}),
        });
        progress.verified = check.equal;
      }
      progress.state = report.missing.length > 0 ? "failed" : "done";
    }
  }

  async #bridge(
    run: MigrationRun,
    input: MigrationRunInput,
    source: NamedBackend["backend"],
    target: NamedBackend["backend"],
    signal: AbortSignal,
  ) {
    const progressOf = (queue: string) => {
      const known = run.queues.find((entry) => entry.queue === queue);
      if (known) return known;
      const progress: QueueProgress = { queue, state: "running", copied: 0, total: null };
      run.queues.push(progress);
      return progress;
    };
    await moveWhatArrives({
      source,
      target,
      queue: input.queue,
      batchSize: input.batchSize ?? 500,
      idPrefix: input.idPrefix,
      intervalMs: input.intervalMs ?? 1_000,
      signal,
      onPage: () => {},
      onQueueMoved: (queue, report) => this.#count(run, progressOf(queue), report.removed),
      onPassFailed: (error) => {
        run.error = error.message;
      },
    });
  }

  #count(run: MigrationRun, progress: QueueProgress, more: number): void {
    progress.copied += more;
    run.copied += more;
  }

  #forgetOld(): void {
    const finished = this.list().filter((run) => run.state !== "running");
    for (const run of finished.slice(KEPT_FINISHED)) this.#runs.delete(run.id);
  }
}
