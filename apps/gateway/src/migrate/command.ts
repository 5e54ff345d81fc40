import {
  type AdapterDescriptor,
  type Backend,
  ChecksumAccumulator,
  JOB_STATES,
  type JobState,
  type MigrationChecksums,
  type MigrationProgress,
  type MigrationReport,
  type VerificationReport,
  migrateQueue,
  verifyMigration,
  verifyQueue,
} from "@switchyard/core";
import { ADAPTERS } from "../adapters.js";
import { type NamedBackend, closeBackends, openBackend } from "../backends.js";
import type { CliIo } from "../cli-io.js";
import { type BackendSpec, type Config, loadConfig } from "../config.js";
import { compilePattern } from "../router.js";
import { type Checkpoint, type QueueCheckpoint, readCheckpoint, writeCheckpoint } from "./checkpoint.js";
import { EndpointError, resolveEndpoint } from "./endpoints.js";
import { whatTheTargetCannotHold } from "./limits.js";
import { type ProgressView, progressView } from "./progress.js";

/** What `switchyard migrate` prints after its options in --help. */
export const MIGRATE_NOTES = `
--from and --to name a backend of the configuration or give a URL: sqlite:./old.db, postgres://...,
mysql://..., mongodb://... (Cloudq), redis://host:6379/0?type=qless or ?type=glidemq. Every queue of
the source is copied unless --queue names one (or a pattern such as "mail-*"). Ids, attempts,
timestamps and native fields travel with the jobs; active jobs arrive waiting. Jobs the target already
holds are skipped. Moving (--mode move), a job a worker holds stays with it; --wait-active waits
(at most that many seconds) for such jobs to finish, then moves them too. After each page the checkpoint file is rewritten, so a migration killed at any
point continues with --resume. Progress goes to stderr (bars on a terminal, else one JSON line per
page); the report, with a checksum per queue and state in source and target, to stdout: the jobs as
read and as the target answered their import, summed as the pages go (checkpointed with them); when
those disagree (or a resumed SCAN-based glide-mq export may have counted a job twice), both queues are
read again to name the jobs that differ. Exit code 1 when a backend is unreachable, the migration
stops, or the verification finds a difference.
`;

/** The options of `switchyard migrate`, as the command line gives them. */
export interface MigrateCommandOptions {
  config?: string;
  from?: string;
  to?: string;
  queue?: string;
  targetQueue?: string;
  states?: string;
  batchSize?: string;
  dryRun?: boolean;
  resume?: boolean;
  checkpoint?: string;
  verify?: boolean;
  mode?: string;
  waitActive?: string;
}

/** A migration that could not start, finish or verify; the message says what to do next. */
export class MigrateError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "MigrateError";
  }
}

export interface QueueReport extends MigrationReport {
  queue: string;
  targetQueue: string;
  verification?: VerificationReport;
}

export interface MigrateCommandReport {
  from: string;
  to: string;
  mode: "copy" | "move";
  queues: QueueReport[];
}

const DEFAULT_CHECKPOINT = "switchyard-migrate.checkpoint.json";

export function parseBatchSize(value: string | undefined): number {
  if (value === undefined) return 1000;
  const size = Number(value);
  if (!/^\d+$/.test(value) || size < 1 || size > 100_000)
    throw new MigrateError(`--batch-size must be a number from 1 to 100000, got "${value}"`);
  return size;
}

function parseMode(value: string | undefined): "copy" | "move" {
  if (value === undefined || value === "copy" || value === "move") return value ?? "copy";
  throw new MigrateError(`--mode is copy or move, got "${value}"`);
}

/** The longest --wait-active: a day. */
const MAX_WAIT_ACTIVE_S = 86_400;

/** --wait-active in ms (0 when not given); only a move leaves active jobs to wait for. */
export function parseWaitActive(value: string | undefined, mode: "copy" | "move"): number {
  if (value === undefined) return 0;
  const seconds = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || seconds > MAX_WAIT_ACTIVE_S)
    throw new MigrateError(`--wait-active takes seconds, from 0 to ${MAX_WAIT_ACTIVE_S}; got "${value}"`);
  if (mode !== "move") throw new MigrateError("--wait-active waits for active jobs to move them: it goes with --mode move");
  return Math.round(seconds * 1000);
}

function parseStates(value: string | undefined): JobState[] | undefined {
  if (value === undefined) return undefined;
  const states = value.split(",").map((state) => state.trim());
  const unknown = states.filter((state) => !(JOB_STATES as readonly string[]).includes(state));
  if (unknown.length > 0 || states.length === 0)
    throw new MigrateError(`--states takes a comma-separated list of ${JOB_STATES.join(", ")}; got "${value}"`);
  return states as JobState[];
}

function listIds(ids: string[]): string {
  const more = ids.length > 20 ? ` and ${ids.length - 20} more` : "";
  return `${ids.slice(0, 20).join(", ")}${more}`;
}

const isPattern = (queue: string) => queue.includes("*");

/** The queues to move: the one named, or the source's queues the pattern (all by default) matches. */
export async function queuesToMove(source: Backend, queue: string | undefined): Promise<string[]> {
  if (queue !== undefined && !isPattern(queue)) return [queue];
  const pattern = compilePattern(queue ?? "*");
  return (await source.queues()).filter((name) => pattern.test(name));
}

interface Endpoints {
  from: { name: string; spec: BackendSpec };
  to: { name: string; spec: BackendSpec };
}

export async function resolveEndpoints(
  values: Pick<MigrateCommandOptions, "from" | "to" | "config">,
  io: CliIo,
  adapters: readonly AdapterDescriptor[],
) {
  const { from, to } = values;
  if (!from || !to) throw new MigrateError("--from and --to are required; try --help");
  const config: Config = await loadConfig(values.config ?? io.env.SWITCHYARD_CONFIG, adapters);
  try {
    return { from: resolveEndpoint(from, config, adapters, "--from"), to: resolveEndpoint(to, config, adapters, "--to") } as Endpoints;
  } catch (error) {
    if (error instanceof EndpointError) throw new MigrateError(error.message);
    throw error;
  }
}

/**
 * Opens the two backends, only those: a third one being down must not stop a migration. Either
 * failing closes what was opened.
 */
export async function openEndpoints(
  endpoints: Endpoints,
  adapters: readonly AdapterDescriptor[],
): Promise<Map<"from" | "to", NamedBackend>> {
  const opened = new Map<"from" | "to", NamedBackend>();
  try {
    opened.set("from", await openBackend(endpoints.from.name, endpoints.from.spec, adapters));
    opened.set("to", await openBackend(endpoints.to.name, endpoints.to.spec, adapters));
    return opened;
  } catch (error) {
    await closeBackends(opened);
    throw error;
  }
}

/** Opens the two backends, runs `work`, and closes them. */
async function withBackends<T>(
  endpoints: Endpoints,
  adapters: readonly AdapterDescriptor[],
  work: (from: Backend, to: Backend) => Promise<T>,
): Promise<T> {
  const opened = await openEndpoints(endpoints, adapters);
  try {
    return await work(opened.get("from")!.backend, opened.get("to")!.backend);
  } finally {
    await closeBackends(opened).catch(() => undefined);
  }
}

/** `--dry-run`: per queue, the jobs by state that would move, and what the target could not hold. */
async function dryRun(from: Backend, to: Backend, queues: string[], states: JobState[] | undefined) {
  const report = [];
  for (const queue of queues) {
    const counts = await from.counts(queue);
    const moving = Object.fromEntries(
      Object.entries(counts).filter(([state, n]) => n > 0 && (states === undefined || states.includes(state as JobState))),
    );
    report.push({ queue, jobs: moving, targetCannotHold: await whatTheTargetCannotHold(from, to, queue, states) });
  }
  return report;
}

/**
 * `switchyard migrate`: copies every queue (or the ones named) from one backend to another, page by
 * page, with a checkpoint after each page, then verifies each queue by checksum. Resolves with the
 * report; rejects with MigrateError (or the ConfigError of a bad or unreachable backend) for exit code 1.
 */
export async function runMigrateCommand(
  values: MigrateCommandOptions,
  io: CliIo,
  adapters: readonly AdapterDescriptor[] = ADAPTERS,
): Promise<MigrateCommandReport | undefined> {
  const batchSize = parseBatchSize(values.batchSize);
  const states = parseStates(values.states);
  const mode = parseMode(values.mode);
  const waitActiveMs = parseWaitActive(values.waitActive, mode);
  const endpoints = await resolveEndpoints(values, io, adapters);
  const { from, to } = { from: endpoints.from.name, to: endpoints.to.name };
  if (values.targetQueue !== undefined && (values.queue === undefined || isPattern(values.queue)))
    throw new MigrateError("--target-queue renames one queue: give that queue with --queue");
  const sameStore = endpoints.from.spec.url === endpoints.to.spec.url && endpoints.from.spec.type === endpoints.to.spec.type;
  if (sameStore && (values.targetQueue === undefined || values.targetQueue === values.queue))
    throw new MigrateError(`--from and --to are both "${from}": give a --target-queue to copy within one backend`);
  const checkpointPath = values.checkpoint ?? DEFAULT_CHECKPOINT;

  return withBackends(endpoints, adapters, async (source, target) => {
    const queues = await queuesToMove(source, values.queue);
    if (values.dryRun) {
      io.out(`${JSON.stringify({ from, to, dryRun: true, queues: await dryRun(source, target, queues, states) }, null, 2)}\n`);
      return undefined;
    }
    const checkpoint = startingCheckpoint(values.resume === true, checkpointPath, from, to);
    const view = progressView(io);
    const reports: QueueReport[] = [];
    try {
      for (const queue of queues) {
        const targetQueue = values.targetQueue ?? queue;
        const saved = checkpoint.queues[queue];
        view.start(
          queue,
          Object.values(await source.counts(queue)).reduce((sum, n) => sum + n, 0),
        );
        const report = saved?.done
          ? finishedBefore(saved)
          : await migrateWithCheckpoint(
              { source, target, queue, targetQueue, batchSize, mode, waitActiveMs, states, checkpoint, checkpointPath, view },
              saved,
            );
        reports.push({ queue, targetQueue, ...report });
      }
      if (values.verify !== false && mode === "copy") {
        for (const report of reports) {
          report.verification = await verifyMigration(source, target, report, {
            queue: report.queue,
            targetQueue: report.targetQueue,
            ...(states ? { states } : {}),
          });
        }
      }
    } finally {
      view.stop();
    }
    const result: MigrateCommandReport = { from, to, mode, queues: reports };
    io.out(`${JSON.stringify(result, null, 2)}\n`);
    failOnDifferences(result);
    return result;
  });
}

interface QueueRun {
  source: Backend;
  target: Backend;
  queue: string;
  targetQueue: string;
  batchSize: number;
  mode: "copy" | "move";
  waitActiveMs: number;
  states: JobState[] | undefined;
  checkpoint: Checkpoint;
  checkpointPath: string;
  view: ProgressView;
}

/**
 * One queue's migration from where the checkpoint left it (`saved`), the checkpoint rewritten after
 * every page; the counts include what earlier runs did. A failure names the checkpoint to resume from.
 */
async function migrateWithCheckpoint(run: QueueRun, saved: QueueCheckpoint | undefined): Promise<MigrationReport> {
  const { queue, checkpoint, checkpointPath } = run;
  const before: QueueCheckpoint = saved ?? { cursor: null, done: false, read: 0, imported: 0, skipped: 0, removed: 0 };
  const sum = (progress: MigrationProgress): MigrationProgress => ({
    ...progress,
    read: before.read + progress.read,
    imported: before.imported + progress.imported,
    skipped: before.skipped + progress.skipped,
    removed: before.removed + progress.removed,
  });
  try {
    const report = await migrateQueue({
      from: run.source,
      to: run.target,
      queue,
      targetQueue: run.targetQueue,
      batchSize: run.batchSize,
      mode: run.mode,
      waitActiveMs: run.waitActiveMs,
      ...(run.states ? { states: run.states } : {}),
      ...(before.cursor !== null ? { cursor: before.cursor } : {}),
      ...(before.cursor !== null ? { checksums: before.checksums ?? unknownChecksums() } : {}),
      onProgress: (progress) => {
        const total = sum(progress);
        const { read, imported, skipped, removed, cursor, checksums } = total;
        checkpoint.queues[queue] = { read, imported, skipped, removed, cursor, checksums, done: cursor === null };
        writeCheckpoint(checkpointPath, checkpoint);
        run.view.page(queue, total);
      },
    });
    return { ...report, ...sum(report) };
  } catch (error) {
    const at = checkpoint.queues[queue]?.read ?? before.read;
    throw new MigrateError(
      `migration of queue "${queue}" stopped after ${at} job(s): ${(error as Error).message}; run the same command with --resume to continue from ${checkpointPath}`,
      { cause: error },
    );
  }
}

/** The report of a queue the checkpoint says was done before (a resumed run skips it). */
function finishedBefore(saved: QueueCheckpoint): MigrationReport {
  const none = { missing: [], clashes: [], keptInSource: [], doubled: [], altered: [], recurrences: 0 };
  return { ...saved, ...none, excluded: 0, leftActive: 0, byState: {}, cursor: null, checksums: saved.checksums ?? unknownChecksums() };
}

/** What a checkpoint without checksums stands for: pages summed nowhere, so the verification must read the queues. */
function unknownChecksums(): MigrationChecksums {
  const none = new ChecksumAccumulator().result();
  return { source: none, target: none, exact: false };
}

/** A fresh checkpoint, or with --resume the one on disk, which must be of the same two backends. */
function startingCheckpoint(resume: boolean, path: string, from: string, to: string): Checkpoint {
  if (!resume) return { from, to, queues: {} };
  const saved = readCheckpoint(path);
  if (saved === null) throw new MigrateError(`--resume: no checkpoint at ${path}; run without --resume to start`);
  if (saved.from !== from || saved.to !== to)
    throw new MigrateError(`--resume: the checkpoint at ${path} is of a migration from ${saved.from} to ${saved.to}, not ${from} to ${to}`);
  return saved;
}

function failOnDifferences(result: MigrateCommandReport): void {
  for (const queue of result.queues) {
    const where = `queue "${queue.queue}"`;
    if (queue.missing.length > 0)
      throw new MigrateError(
        `${where}: ${queue.missing.length} job(s) read from ${result.from} are missing from ${result.to}: ${listIds(queue.missing)}`,
      );
    if (queue.clashes.length > 0)
      throw new MigrateError(
        `${where}: ${queue.clashes.length} job(s) of ${result.from} were not copied: ${result.to} already holds other jobs with their ids in queue "${queue.targetQueue}": ${listIds(queue.clashes)}; migrate into an empty --target-queue`,
      );
    if (queue.altered.length > 0)
      throw new MigrateError(`${where}: ${queue.altered.length} job(s) arrived in ${result.to} changed: ${listIds(queue.altered)}`);
    if (queue.doubled.length > 0)
      throw new MigrateError(
        `${where}: ${queue.doubled.length} job(s) were taken by workers of both ${result.from} and ${result.to} while moving: ${listIds(queue.doubled)}`,
      );
    if (queue.verification && !queue.verification.equal)
      throw new MigrateError(
        `${where}: the checksums of ${result.from} and ${result.to} differ; these jobs differ or are in one of them only: ${listIds(queue.verification.differing)}`,
      );
  }
}

/**
 * `switchyard verify`: the checksum comparison a migration ends with, alone: per queue and state, jobs
 * and checksum in source and target, and the ids that differ. Rejects with MigrateError when any differ.
 */
export async function runVerifyCommand(
  values: Pick<MigrateCommandOptions, "config" | "from" | "to" | "queue" | "targetQueue" | "states">,
  io: CliIo,
  adapters: readonly AdapterDescriptor[] = ADAPTERS,
): Promise<VerificationReport[]> {
  const states = parseStates(values.states);
  const endpoints = await resolveEndpoints(values, io, adapters);
  if (values.targetQueue !== undefined && (values.queue === undefined || isPattern(values.queue)))
    throw new MigrateError("--target-queue renames one queue: give that queue with --queue");
  return withBackends(endpoints, adapters, async (source, target) => {
    const reports: VerificationReport[] = [];
    for (const queue of await queuesToMove(source, values.queue)) {
      reports.push(await verifyQueue(source, target, { queue, targetQueue: values.targetQueue ?? queue, ...(states ? { states } : {}) }));
    }
    io.out(`${JSON.stringify({ from: endpoints.from.name, to: endpoints.to.name, queues: reports }, null, 2)}\n`);
    const unequal = reports.filter((report) => !report.equal);
    if (unequal.length > 0)
      throw new MigrateError(
        unequal
          .map((report) => `queue "${report.queue}": these jobs differ or are in one store only: ${listIds(report.differing)}`)
          .join("; "),
      );
    return reports;
  });
}
