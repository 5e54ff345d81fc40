import type { Backend } from "./backend.js";
import type { Job, JobState } from "./job.js";

export interface MigrationProgress {
  /** Jobs read from the source so far. */
  read: number;
  imported: number;
  /** Jobs the target already had (a resumed migration). */
  skipped: number;
  /** Jobs read but left behind because their state is not among `states`. */
  excluded: number;
  /** Jobs read, by state. */
  byState: Partial<Record<JobState, number>>;
  /** The export cursor to resume from, or null once the source is exhausted. */
  cursor: string | null;
}

export interface MigrateOptions {
  from: Backend;
  to: Backend;
  queue: string;
  /** The queue name on the target; defaults to `queue`. */
  targetQueue?: string;
  /** Jobs per page; default 500. */
  batchSize?: number;
  /** Resume after an interruption: the cursor last reported through onProgress. */
  cursor?: string;
  /** Only jobs in these states are copied; all by default. */
  states?: readonly JobState[];
  onProgress?: (progress: MigrationProgress) => void;
}

export interface MigrationReport extends MigrationProgress {
  /** Ids read from the source that the target does not hold afterwards; empty when nothing was lost. */
  missing: string[];
  /**
   * Source ids the target already used for a different job (two systems that both number jobs 1, 2...):
   * those source jobs were not copied. Empty when every skipped id was this same job, copied before.
   */
  clashes: string[];
}

/**
 * The same job when name and creation second agree (qless keeps createdAt in whole seconds), so a
 * resumed migration's skipped ids are told apart from another job that happens to hold the id.
 */
function sameJob(source: Job, held: Job): boolean {
  return source.name === held.name && Math.floor(source.createdAt / 1000) === Math.floor(held.createdAt / 1000);
}

/** The jobs of these ids: in one call where the backend has getMany, else all gets at once. */
export function getMany(backend: Backend, queue: string, ids: string[]): Promise<Array<Job | null>> {
  return backend.getMany ? backend.getMany(queue, ids) : Promise.all(ids.map((id) => backend.get(queue, id)));
}

/**
 * Copies every job of a queue, in every state, from one backend to another, page by page. Ids,
 * attempts, timestamps and native fields travel with the jobs; ids the target already holds are
 * skipped, so running it again (or from a reported cursor) after an interruption is safe, and a skipped
 * id that belongs to a different job is reported as a clash. Each page is verified against the target
 * before the next is read, and the report lists anything missing.
 */
export async function migrateQueue(options: MigrateOptions): Promise<MigrationReport> {
  const { from, to, queue } = options;
  const targetQueue = options.targetQueue ?? queue;
  const limit = options.batchSize ?? 500;
  const progress: MigrationProgress = { read: 0, imported: 0, skipped: 0, excluded: 0, byState: {}, cursor: options.cursor ?? null };
  const wanted = options.states ? new Set(options.states) : null;
  const missing: string[] = [];
  const clashes: string[] = [];
  for (;;) {
    const page = await from.export(queue, progress.cursor === null ? { limit } : { limit, cursor: progress.cursor });
    progress.read += page.items.length;
    for (const job of page.items) progress.byState[job.state] = (progress.byState[job.state] ?? 0) + 1;
    const jobs = wanted ? page.items.filter((job) => wanted.has(job.state)) : page.items;
    progress.excluded += page.items.length - jobs.length;
    if (jobs.length > 0) {
      const result = await to.import(targetQueue, jobs);
      progress.imported += result.imported;
      progress.skipped += result.skipped.length;
      const skipped = new Set(result.skipped);
      const held = await getMany(
        to,
        targetQueue,
        jobs.map((job) => job.id),
      );
      jobs.forEach((job, i) => {
        const target = held[i] ?? null;
        if (target === null) missing.push(job.id);
        else if (skipped.has(job.id) && !sameJob(job, target)) clashes.push(job.id);
      });
    }
    progress.cursor = page.cursor;
    options.onProgress?.({ ...progress, byState: { ...progress.byState } });
    if (page.cursor === null) return { ...progress, missing, clashes };
  }
}
