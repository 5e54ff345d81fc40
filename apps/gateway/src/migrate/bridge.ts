import { type AdapterDescriptor, type Backend, type MigrationProgress, type MigrationReport, migrateQueue, pause } from "@switchyard/core";
import { ADAPTERS } from "../adapters.js";
import { closeBackends } from "../backends.js";
import type { RunningBridge } from "../bridge/bridge-command.js";
import type { CliIo } from "../cli-io.js";
import { MigrateError, openEndpoints, parseBatchSize, queuesToMove, resolveEndpoints } from "./command.js";
import { progressView } from "./progress.js";

/** What `switchyard bridge` prints after its options in --help. */
export const BRIDGE_NOTES = `
The live cutover: switch the workers to the target first, then the producers, while the bridge moves
every job that arrives in the source (every queue, or those --queue names or matches) to the target,
where the workers now are; nothing is lost between. Jobs a worker of the source still holds stay there
until it is done with them. When the target numbers its own jobs (SQL row ids, glide-mq's counter) and
producers write there before the bridge is done, a moved job's id may be taken: give --id-prefix so
that moved jobs get ids of their own (reported as clashes otherwise, and left in the source). Progress
goes to stderr as for migrate; SIGTERM or SIGINT finishes the page
in hand, prints the totals on stdout and exits 0.
`;

export interface CutoverOptions {
  config?: string;
  from?: string;
  to?: string;
  queue?: string;
  interval?: string;
  batchSize?: string;
  idPrefix?: string;
}

/** Totals of a bridge's passes so far. */
interface Totals {
  passes: number;
  moved: number;
  leftActive: number;
  keptInSource: number;
  doubled: string[];
  altered: string[];
  missing: string[];
  /** Source jobs whose id the target already gave another job: not moved (see --id-prefix). */
  clashes: string[];
}

function intervalOf(value: string | undefined): number {
  if (value === undefined) return 1000;
  const ms = Number(value);
  if (!/^\d+$/.test(value) || ms < 10 || ms > 3_600_000)
    throw new MigrateError(`--interval must be a number of ms from 10 to 3600000, got "${value}"`);
  return ms;
}

/** What `moveWhatArrives` is told as it goes. */
export interface ArrivalsMover {
  source: Backend;
  target: Backend;
  /** A queue name or pattern; every queue of the source when left out. */
  queue: string | undefined;
  batchSize: number;
  idPrefix: string | undefined;
  intervalMs: number;
  signal: AbortSignal;
  onPage(queue: string, progress: MigrationProgress): void;
  onQueueMoved(queue: string, report: MigrationReport): void;
  onPassFailed(error: Error): void;
  /** A pass went through every queue. */
  onPass?(): void;
  /** A queue's move starts (+1) or ends (-1): what a graceful stop waits for. */
  onBusy?(change: 1 | -1): void;
}

/**
 * The bridge's loop: moves (migrate in `move` mode) every job that reaches the source's queues to
 * the target, pass after pass, until the signal aborts. A pass that fails (a store down) is reported
 * and tried again after the interval; one that moved something goes again at once.
 */
export async function moveWhatArrives(mover: ArrivalsMover): Promise<void> {
  const { source, target, signal } = mover;
  const pass = async (): Promise<number> => {
    let moved = 0;
    for (const queue of await queuesToMove(source, mover.queue)) {
      if (signal.aborted) break;
      mover.onBusy?.(1);
      try {
        const report = await migrateQueue({
          from: source,
          to: target,
          queue,
          batchSize: mover.batchSize,
          mode: "move",
          signal,
          ...(mover.idPrefix ? { idPrefix: mover.idPrefix } : {}),
          onProgress: (progress) => {
            if (progress.read > 0) mover.onPage(queue, progress);
          },
        });
        moved += report.removed;
        mover.onQueueMoved(queue, report);
      } finally {
        mover.onBusy?.(-1);
      }
    }
    return moved;
  };
  while (!signal.aborted) {
    let moved = 0;
    try {
      moved = await pass();
      mover.onPass?.();
    } catch (error) {
      mover.onPassFailed(error as Error);
    }
    if (moved === 0 && !signal.aborted) await pause(mover.intervalMs, signal);
  }
}

/**
 * `switchyard bridge`: moves (migrate --mode move) every job that reaches the source's queues to the
 * target, pass after pass, until stopped. A pass that fails (a store down) is reported and tried again.
 */
export async function runCutover(
  values: CutoverOptions,
  io: CliIo,
  adapters: readonly AdapterDescriptor[] = ADAPTERS,
): Promise<RunningBridge> {
  const intervalMs = intervalOf(values.interval);
  const batchSize = parseBatchSize(values.batchSize);
  const endpoints = await resolveEndpoints(values, io, adapters);
  const { from, to } = endpoints;
  const opened = await openEndpoints(endpoints, adapters);
  const source = opened.get("from")!.backend;
  const target = opened.get("to")!.backend;
  const view = progressView(io);
  const totals: Totals = { passes: 0, moved: 0, leftActive: 0, keptInSource: 0, doubled: [], altered: [], missing: [], clashes: [] };
  const stop = new AbortController();
  let busy = 0;
  const loop = () =>
    moveWhatArrives({
      source,
      target,
      queue: values.queue,
      batchSize,
      idPrefix: values.idPrefix,
      intervalMs,
      signal: stop.signal,
      onPage: (queue, progress) => view.page(queue, progress),
      onPass: () => {
        totals.passes++;
      },
      onQueueMoved: (_queue, report) => {
        totals.moved += report.removed;
        totals.leftActive = report.leftActive;
        totals.keptInSource += report.keptInSource.length;
        totals.doubled.push(...report.doubled);
        totals.altered.push(...report.altered);
        totals.missing.push(...report.missing);
        for (const id of report.clashes) if (!totals.clashes.includes(id)) totals.clashes.push(id);
      },
      onPassFailed: (error) => io.err(`switchyard bridge: ${error.message}; trying again in ${intervalMs} ms\n`),
      onBusy: (change) => {
        busy += change;
      },
    });
  io.err(`switchyard bridge: moving from ${from.name} to ${to.name}, looking again every ${intervalMs} ms\n`);
  const finished = loop().finally(async () => {
    view.stop();
    await closeBackends(opened);
    io.out(`${JSON.stringify({ from: from.name, to: to.name, ...totals }, null, 2)}\n`);
  });
  return {
    inFlight: () => busy,
    finished,
    close: async () => {
      stop.abort();
      await finished;
    },
  };
}
