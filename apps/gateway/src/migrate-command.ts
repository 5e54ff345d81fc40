import { type AdapterDescriptor, type MigrationProgress, type MigrationReport, migrateQueue } from "@switchyard/core";
import { ADAPTERS } from "./adapters.js";
import { closeBackends, openBackends } from "./backends.js";
import type { CliIo } from "./cli-io.js";
import { type Config, loadConfig } from "./config.js";

/** What `switchyard migrate` prints after its options in --help. */
export const MIGRATE_NOTES = `
Ids, attempts, timestamps and native fields travel with the jobs; active jobs arrive waiting. Jobs the
target already holds are skipped, so running the same command again is safe. A progress line per page
goes to stderr, the final report (JSON) to stdout. Exit code 1 when a backend is unreachable, the
migration stops, or a job read from the source is missing from the target.
`;

/** The options of `switchyard migrate`, as the command line gives them. */
export interface MigrateCommandOptions {
  config?: string;
  from?: string;
  to?: string;
  queue?: string;
  targetQueue?: string;
  batchSize?: string;
  resume?: string;
}

/** A migration that could not finish or did not verify; the message says what to do next. */
export class MigrateError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "MigrateError";
  }
}

export interface MigrateCommandReport extends MigrationReport {
  from: string;
  to: string;
  queue: string;
  targetQueue: string;
}

function parseBatchSize(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const size = Number(value);
  if (!/^\d+$/.test(value) || size < 1 || size > 100_000)
    throw new MigrateError(`--batch-size must be a number from 1 to 100000, got "${value}"`);
  return size;
}

function backendNamed(config: Config, name: string, flag: string, source: string): void {
  if (name in config.backends) return;
  const known = Object.keys(config.backends).join(", ");
  throw new MigrateError(`${flag} "${name}" names no backend in ${source} (known: ${known})`);
}

/** `total` is the source's job count when the migration started: a live queue may change meanwhile. */
function listIds(ids: string[]): string {
  const more = ids.length > 20 ? ` and ${ids.length - 20} more` : "";
  return `${ids.slice(0, 20).join(", ")}${more}`;
}

function progressLine(progress: MigrationProgress, total: number): string {
  const share = total > 0 ? ` of ~${total} (${Math.min(100, Math.floor((progress.read / total) * 100))}%)` : "";
  const counts = `read ${progress.read}${share}, imported ${progress.imported}, skipped ${progress.skipped}`;
  const next = progress.cursor === null ? "source exhausted, every page verified" : `resume with --resume ${progress.cursor}`;
  return `switchyard migrate: ${counts}; ${next}\n`;
}

/**
 * `switchyard migrate`: opens only the two named backends, copies the queue page by page, prints
 * progress to stderr and the report to stdout. Resolves with the report; rejects with MigrateError
 * (or the ConfigError of a bad or unreachable backend) for exit code 1.
 */
export async function runMigrateCommand(
  values: MigrateCommandOptions,
  io: CliIo,
  adapters: readonly AdapterDescriptor[] = ADAPTERS,
): Promise<MigrateCommandReport> {
  const { from, to, queue } = values;
  if (!from || !to || !queue) throw new MigrateError("--from, --to and --queue are required; try switchyard migrate --help");
  const targetQueue = values.targetQueue ?? queue;
  const batchSize = parseBatchSize(values.batchSize);
  if (from === to && targetQueue === queue)
    throw new MigrateError(`--from and --to are both "${from}": give a --target-queue to copy within one backend`);

  const configPath = values.config ?? io.env.SWITCHYARD_CONFIG;
  const config = await loadConfig(configPath, adapters);
  const source = configPath ? `config file ${configPath}` : "the built-in default config";
  backendNamed(config, from, "--from", source);
  backendNamed(config, to, "--to", source);

  // Only the two backends the command names: a third one being down must not stop a migration.
  const specs = { [from]: config.backends[from]!, [to]: config.backends[to]! };
  const opened = await openBackends({ ...config, backends: specs }, adapters);
  let last: MigrationProgress = { read: 0, imported: 0, skipped: 0, cursor: values.resume ?? null };
  let report: MigrationReport;
  try {
    const fromBackend = opened.get(from)!.backend;
    const total = Object.values(await fromBackend.counts(queue)).reduce((sum, n) => sum + n, 0);
    report = await migrateQueue({
      from: fromBackend,
      to: opened.get(to)!.backend,
      queue,
      targetQueue,
      ...(batchSize ? { batchSize } : {}),
      ...(values.resume ? { cursor: values.resume } : {}),
      onProgress: (progress) => {
        last = progress;
        io.err(progressLine(progress, total));
      },
    });
  } catch (error) {
    const resume =
      last.cursor === null ? "run the same command again (jobs already copied are skipped)" : `resume with --resume ${last.cursor}`;
    throw new MigrateError(
      `migration of queue "${queue}" from ${from} to ${to} stopped after ${last.read} job(s): ${(error as Error).message}; ${resume}`,
      {
        cause: error,
      },
    );
  } finally {
    await closeBackends(opened).catch(() => undefined);
  }

  const result: MigrateCommandReport = { from, to, queue, targetQueue, ...report };
  io.out(`${JSON.stringify(result, null, 2)}\n`);
  if (report.missing.length > 0) {
    throw new MigrateError(
      `${report.missing.length} job(s) read from ${from} are missing from ${to} after the migration: ${listIds(report.missing)}`,
    );
  }
  if (report.clashes.length > 0) {
    throw new MigrateError(
      `${report.clashes.length} job(s) of ${from} were not copied: ${to} already holds other jobs with their ids in queue "${targetQueue}": ${listIds(report.clashes)}; migrate into an empty --target-queue`,
    );
  }
  return result;
}
