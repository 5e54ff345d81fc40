import type { Backend } from "./backend.js";

export interface MigrationProgress {
  /** Jobs read from the source so far. */
  read: number;
  imported: number;
  /** Jobs the target already had (a resumed migration). */
  skipped: number;
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
  onProgress?: (progress: MigrationProgress) => void;
}

export interface MigrationReport extends MigrationProgress {
  /** Ids read from the source that the target does not hold afterwards; empty when nothing was lost. */
  missing: string[];
}

/**
 * Copies every job of a queue, in every state, from one backend to another, page by page. Ids,
 * attempts, timestamps and native fields travel with the jobs; ids the target already holds are
 * skipped, so running it again (or from a reported cursor) after an interruption is safe. Each page
 * is verified against the target before the next is read, and the report lists anything missing.
 */
export async function migrateQueue(options: MigrateOptions): Promise<MigrationReport> {
  const { from, to, queue } = options;
  const targetQueue = options.targetQueue ?? queue;
  const limit = options.batchSize ?? 500;
  const progress: MigrationProgress = { read: 0, imported: 0, skipped: 0, cursor: options.cursor ?? null };
  const missing: string[] = [];
  for (;;) {
    const page = await from.export(queue, progress.cursor === null ? { limit } : { limit, cursor: progress.cursor });
    if (page.items.length > 0) {
      const result = await to.import(targetQueue, page.items);
      progress.read += page.items.length;
      progress.imported += result.imported;
      progress.skipped += result.skipped.length;
      for (const job of page.items) if ((await to.get(targetQueue, job.id)) === null) missing.push(job.id);
    }
    progress.cursor = page.cursor;
    options.onProgress?.({ ...progress });
    if (page.cursor === null) return { ...progress, missing };
  }
}
