import {
  ConflictError,
  type EnqueueInput,
  type EnqueueResult,
  type ImportResult,
  type Job,
  JobSchema,
  type NormalizedEnqueueInput,
  UnsupportedError,
  ValidationError,
  normalizeEnqueueInput,
  parseOrThrow,
  runAtOf,
} from "@switchyard/core";
import type { Knex } from "knex";
import { ACTIVE_STATUSES, type JobRow, STATUS, SY } from "./columns.js";
import { isUniqueViolation, withRetry } from "./db-errors.js";
import { type Db, findByUniqueKey, findRow, findRows, rowById } from "./lookup.js";
import type { Store } from "./options.js";
import { enqueueRow, importRow, rowToJob } from "./row.js";
import { advanceIdCounter } from "./sequence.js";

export function normalize(input: EnqueueInput): NormalizedEnqueueInput {
  const normalized = normalizeEnqueueInput(input);
  // sy_run_at is a bigint of epoch ms: a time past any safe integer is refused rather than rounded.
  if (!Number.isSafeInteger(normalized.runAt ?? Date.now() + (normalized.delay ?? 0))) {
    throw new ValidationError("workerqueue-sql: runAt/delay is too far in the future");
  }
  if (normalized.dependsOn.length > 0) {
    throw new UnsupportedError("workerqueue-sql: job dependencies are not supported (capability dependencies: false)");
  }
  return normalized;
}

export async function enqueueOne(store: Store, queue: string, input: EnqueueInput): Promise<EnqueueResult> {
  const normalized = normalize(input);
  const result = await withRetry("enqueue", () => insertOrFind(store, store.knex, queue, normalized, false));
  if (result.created && normalized.id) await advanceIdCounter(store, store.knex, [normalized.id]);
  return result;
}

/** All-or-nothing: every input is validated before the transaction writes the first row. */
export async function enqueueMany(store: Store, queue: string, inputs: EnqueueInput[]): Promise<EnqueueResult[]> {
  const normalized = inputs.map(normalize);
  const results = await withRetry("enqueueBulk", () =>
    store.knex.transaction(async (trx) => {
      const out: EnqueueResult[] = [];
      for (const input of normalized) out.push(await insertOrFind(store, trx, queue, input, true));
      return out;
    }),
  );
  const chosenIds = normalized.flatMap((input, i) => (input.id && results[i]?.created ? [input.id] : []));
  await advanceIdCounter(store, store.knex, chosenIds);
  return results;
}

/**
 * Inserts a pending row unless the queue already has the caller's id or unique key, in which case
 * the first job is returned. The unique indexes settle races between concurrent enqueues.
 */
async function insertOrFind(
  store: Store,
  db: Db,
  queue: string,
  input: NormalizedEnqueueInput,
  inTransaction: boolean,
): Promise<EnqueueResult> {
  const now = Date.now();
  const existing = await findExisting(store, db, queue, input);
  if (existing) return { job: rowToJob(store, existing, now), created: false };
  const row = enqueueRow(store, queue, input, runAtOf(input, now), now);
  const keyed = input.id !== undefined || input.uniqueKey !== undefined;
  try {
    // In a transaction a refused insert would abort it (Postgres): a savepoint contains the failure.
    const stored =
      keyed && inTransaction
        ? await (db as Knex.Transaction).transaction((savepoint) => insertRow(store, savepoint, row))
        : await insertRow(store, db, row);
    return { job: rowToJob(store, stored, now), created: true };
  } catch (error) {
    if (!keyed || !isUniqueViolation(error)) throw error;
    const winner = await findExisting(store, db, queue, input, true);
    if (!winner) throw error;
    return { job: rowToJob(store, winner, now), created: false };
  }
}

async function findExisting(store: Store, db: Db, queue: string, input: NormalizedEnqueueInput, latest = false): Promise<JobRow | null> {
  if (input.id !== undefined) {
    const byId = await findRow(store, db, queue, input.id, latest);
    if (byId) return byId;
  }
  if (input.uniqueKey === undefined) return null;
  const holder = await findByUniqueKey(store, db, queue, input.uniqueKey, latest);
  if (holder && !(holder.status === STATUS.pending || (ACTIVE_STATUSES as string[]).includes(holder.status ?? ""))) {
    // Finished by a legacy daemon (which knows nothing of sy_unique_slot): let the key go now.
    await db(store.table)
      .where("id", holder.id)
      .where("status", holder.status ?? "")
      .update({ [SY.uniqueSlot]: null });
    return null;
  }
  return holder;
}

/** Inserts and returns the stored row: RETURNING where there is one, a read-back on MySQL. */
export async function insertRow(store: Store, db: Db, row: Record<string, unknown>): Promise<JobRow> {
  if (store.dialect === "mysql") {
    const [id] = (await db(store.table).insert(row)) as number[];
    return rowById(store, db, Number(id));
  }
  const [inserted] = (await db(store.table).insert(row, "*")) as JobRow[];
  if (!inserted) throw new Error("workerqueue-sql: the insert returned no row");
  return inserted;
}

/** Bound parameters per statement stay under every dialect's limit (SQLite's is 32,766). */
const MAX_BINDINGS = 30_000;
/** knex writes SQLite's multi-row insert as one compound SELECT, which SQLite caps at 500 terms. */
const MAX_SQLITE_ROWS_PER_INSERT = 500;

/**
 * The rows of a chunk whose multi-row insert met a unique index: a concurrent import of the same
 * job (skipped, as if it had been there) or a unique key another job of the queue holds (refused).
 */
async function importOneByOne(store: Store, trx: Knex.Transaction, queue: string, jobs: Job[], now: number, outcome: ImportResult) {
  for (const job of jobs) {
    try {
      await trx.transaction((savepoint) => savepoint(store.table).insert(importRow(store, queue, job, now)));
      outcome.imported++;
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      if (await findRow(store, trx, queue, job.id, true)) {
        outcome.skipped.push(job.id);
        continue;
      }
      throw new ConflictError(`workerqueue-sql: job ${job.id} has the unique key of another job of ${queue}`, {
        id: job.id,
        uniqueKey: job.uniqueKey,
      });
    }
  }
}

/** Writes jobs as they were (ids, states, attempts, timestamps); ids already in the queue are skipped. */
export async function importJobs(store: Store, queue: string, jobs: Job[]): Promise<ImportResult> {
  const checked = jobs.map((job) => parseOrThrow(JobSchema, job, "imported job"));
  const tooLong = checked.find((job) => job.id.length > 255 || job.name.length > 255 || (job.uniqueKey?.length ?? 0) > 255);
  if (tooLong) {
    throw new ValidationError(`workerqueue-sql: job ${tooLong.id.slice(0, 40)}...: id, name and unique key hold at most 255 characters`);
  }
  const blocked = checked.find((job) => job.state === "blocked" || job.dependsOn.length > 0);
  if (blocked) {
    throw new UnsupportedError(`workerqueue-sql: job ${blocked.id} has dependencies, which this backend does not support`);
  }
  const result = await withRetry("import", () =>
    store.knex.transaction(async (trx) => {
      const outcome: ImportResult = { imported: 0, skipped: [] };
      const now = Date.now();
      const held = await findRows(
        store,
        trx,
        queue,
        checked.map((job) => job.id),
      );
      const fresh = checked.filter((job) => {
        if (held.has(job.id)) outcome.skipped.push(job.id);
        return !held.has(job.id);
      });
      const rows = fresh.map((job) => importRow(store, queue, job, now));
      const columns = Math.max(1, ...rows.map((row) => Object.keys(row).length));
      const byBindings = Math.floor(MAX_BINDINGS / columns);
      const perInsert = Math.max(1, store.dialect === "sqlite" ? Math.min(MAX_SQLITE_ROWS_PER_INSERT, byBindings) : byBindings);
      for (let start = 0; start < fresh.length; start += perInsert) {
        const chunk = fresh.slice(start, start + perInsert);
        try {
          // One multi-row insert per chunk; the savepoint lets a refused chunk be redone row by row.
          await trx.transaction((savepoint) => savepoint(store.table).insert(rows.slice(start, start + perInsert)));
          outcome.imported += chunk.length;
        } catch (error) {
          if (!isUniqueViolation(error)) throw error;
          await importOneByOne(store, trx, queue, chunk, now, outcome);
        }
      }
      return outcome;
    }),
  );
  const skipped = new Set(result.skipped);
  await advanceIdCounter(
    store,
    store.knex,
    checked.filter((job) => !skipped.has(job.id)).map((job) => job.id),
  );
  return result;
}
