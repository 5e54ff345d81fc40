import { type AdapterDescriptor, type MigrationProgress, migrateQueue } from "@switchyard/core";
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
  let wake: (() => void) | undefined;

  const pass = async (): Promise<number> => {
    let moved = 0;
    for (const queue of await queuesToMove(source, values.queue)) {
      if (stop.signal.aborted) break;
      busy++;
      try {
        const report = await migrateQueue({
          from: source,
          to: target,
          queue,
          batchSize,
          mode: "move",
          signal: stop.signal,
          ...(values.idPrefix ? { idPrefix: values.idPrefix } : {}),
          onProgress: (progress: MigrationProgress) => {
            if (progress.read > 0) view.page(queue, progress);
          },
        });
        moved += report.removed;
        totals.moved += report.removed;
        totals.leftActive = report.leftActive;
        totals.keptInSource += report.keptInSource.length;
        totals.doubled.push(...report.doubled);
        totals.altered.push(...report.altered);
        totals.missing.push(...report.missing);
        for (const id of report.clashes) if (!totals.clashes.includes(id)) totals.clashes.push(id);
      } finally {
        busy--;
      }
    }
    totals.passes++;
    return moved;
  };

  const loop = async () => {
    while (!stop.signal.aborted) {
      let moved = 0;
      try {
        moved = await pass();
      } catch (error) {
        io.err(`switchyard bridge: ${(error as Error).message}; trying again in ${intervalMs} ms\n`);
      }
      // A pass that moved something goes again at once: more may have come meanwhile.
      if (moved === 0 && !stop.signal.aborted)
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, intervalMs);
        });
    }
  };
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
      wake?.();
      await finished;
    },
  };
}
