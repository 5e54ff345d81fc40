import type { AdapterDescriptor } from "@switchyard/core";
import { ADAPTERS } from "../adapters.js";
import { closeBackends, openBackends } from "../backends.js";
import type { CliIo } from "../cli-io.js";
import { ConfigError, loadConfig } from "../config.js";
import { BridgeMetrics } from "./bridge-metrics.js";
import { type BridgeEvent, LegacyBridge } from "./legacy-bridge.js";

/** What `switchyard bridge-legacy` prints after its options in --help. */
export const BRIDGE_NOTES = `
Claims the legacy table's pending rows (they read "processing"), enqueues each on the target as job
<table>-<row id> (--id-prefix), and writes the outcome back to the row when the job finishes there: "complete", or
"error" with the target's message in "details". One JSON line per step goes to stdout. Killed at any
point (even kill -9) and started again, it hands every row out exactly once. SIGTERM or SIGINT
finishes the current pass and stops; rows in flight are taken back by the next run.
`;

export interface BridgeCommandOptions {
  config?: string;
  from?: string;
  to?: string;
  queue?: string;
  targetQueue?: string;
  interval?: string;
  batchSize?: string;
  leaseMs?: string;
  worker?: string;
  idPrefix?: string;
  once?: boolean;
  metricsPort?: string;
}

/** A bridge running until stopped; `finished` settles when it stops (with --once: when the table is drained). */
export interface RunningBridge {
  inFlight(): number;
  close(): Promise<void>;
  finished: Promise<void>;
}

function whole(value: string | undefined, flag: string, fallback: number, max: number, min = 1): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max) throw new ConfigError(`${flag} must be a number from ${min} to ${max}, got "${value}"`);
  return n;
}

function describe(event: BridgeEvent): string {
  return `${JSON.stringify({ time: new Date().toISOString(), ...event })}\n`;
}

/**
 * `switchyard bridge-legacy`: opens the two named backends and runs the bridge every `--interval`
 * ms until stopped. A pass that fails (a store down) is reported on stderr and tried again.
 */
export async function runBridgeCommand(
  values: BridgeCommandOptions,
  io: CliIo,
  adapters: readonly AdapterDescriptor[] = ADAPTERS,
): Promise<RunningBridge> {
  const { from, to } = values;
  if (!from || !to) throw new ConfigError("--from and --to are required; try switchyard bridge-legacy --help");
  const intervalMs = whole(values.interval, "--interval", 500, 600_000);
  const batchSize = whole(values.batchSize, "--batch-size", 100, 10_000);
  const leaseMs = whole(values.leaseMs, "--lease-ms", 24 * 60 * 60 * 1000, 7 * 24 * 60 * 60 * 1000);

  const configPath = values.config ?? io.env.SWITCHYARD_CONFIG;
  const config = await loadConfig(configPath, adapters);
  for (const [flag, name] of [
    ["--from", from],
    ["--to", to],
  ] as const) {
    if (!(name in config.backends)) {
      throw new ConfigError(`${flag} "${name}" names no backend in the config (known: ${Object.keys(config.backends).join(", ")})`);
    }
  }
  if (config.backends[from]!.type !== "workerqueue-sql") {
    throw new ConfigError(
      `--from "${from}" must be a workerqueue-sql backend over the legacy jobs table (it is ${config.backends[from]!.type})`,
    );
  }

  const metricsPort = values.metricsPort === undefined ? undefined : whole(values.metricsPort, "--metrics-port", 0, 65_535, 0);
  let bridge: LegacyBridge;
  // Scraped only once the bridge exists: its port opens below.
  const metrics = new BridgeMetrics(() => bridge.inFlight());
  const opened = await openBackends({ ...config, backends: { [from]: config.backends[from]!, [to]: config.backends[to]! } }, adapters);
  const queue = values.queue ?? (config.backends[from]!.options.defaultQueue as string | undefined) ?? "default";
  try {
    bridge = new LegacyBridge({
      source: opened.get(from)!.backend,
      target: opened.get(to)!.backend,
      queue,
      targetQueue: values.targetQueue ?? queue,
      worker: values.worker ?? "switchyard-bridge",
      idPrefix: values.idPrefix ?? `${(config.backends[from]!.options.table as string | undefined) ?? "jobs"}-`,
      batchSize,
      leaseMs,
      onEvent: (event) => {
        metrics.count(event);
        io.out(describe(event));
      },
    });
  } catch (error) {
    await closeBackends(opened);
    throw new ConfigError(`--to "${to}": ${(error as Error).message}`, { cause: error });
  }

  let stopping = false;
  let wake: (() => void) | undefined;
  const loop = async () => {
    while (!stopping) {
      try {
        await bridge.tick();
        if (values.once && bridge.inFlight() === 0 && (await opened.get(from)!.backend.counts(queue)).waiting === 0) break;
      } catch (error) {
        io.err(`switchyard bridge-legacy: ${(error as Error).message}; trying again in ${intervalMs} ms\n`);
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, intervalMs);
      });
    }
  };
  const served = metricsPort === undefined ? undefined : await metrics.listen(metricsPort, "127.0.0.1");
  if (served) io.err(`switchyard bridge-legacy: metrics on ${served.url}\n`);
  const finished = loop().finally(() => Promise.all([closeBackends(opened), served?.close()]));
  io.err(`switchyard bridge-legacy: ${from} queue "${queue}" -> ${to}, a pass every ${intervalMs} ms\n`);
  return {
    inFlight: () => bridge.inFlight(),
    finished,
    close: async () => {
      stopping = true;
      wake?.();
      await finished;
    },
  };
}
