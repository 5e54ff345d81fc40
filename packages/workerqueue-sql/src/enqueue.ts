import {
  ConflictError,
  type EnqueueInput,
  type EnqueueResult,
  type ImportResult,
  type Job,
  JobSchema,
  type NormalizedEnqueueInput,
  ValidationError,
  normalizeEnqueueInput,
  parseOrThrow,
  runAtOf,
} from "@switchyard/core";
import type { Knex } from "knex";
import { insertPlain, insertReturning, insertSkippingConflicts } from "./bulk-insert.js";
import { ACTIVE_STATUSES, type JobRow, STATUS, SY } from "./columns.js";
import { isUniqueViolation, withRetry } from "./db-errors.js";
import { markImportedParents, markUnfinishedParents } from "./dependencies.js";
import type { EnqueueBurst } from "./enqueue-burst.js";
import { type Db, findByUniqueKey, findByUniqueKeys, findRow, findRows, rowById } from "./lookup.js";
import type { Store } from "./options.js";
import { PostgresIdEnqueues } from "./postgres-id-enqueue.js";
import { enqueueRow, heldColumns, heldJobOf, importRow, rowToJob } from "./row.js";
import { advanceIdCounter } from "./sequence.js";

export function normalize(input: EnqueueInput): NormalizedEnqueueInput {
  const normalized = normalizeEnqueueInput(input);
  // sy_run_at is a bigint of epoch ms: a time past any safe integer is refused rather than rounded.
  if (!Number.isSafeInteger(normalized.runAt ?? Date.now() + (normalized.delay ?? 0))) {
    throw new ValidationError("workerqueue-sql: runAt/delay is too far in the future");
  }
  return normalized;
}

export async function enqueueOne(
  store: Store,
  queue: string,
  input: EnqueueInput,
  burst?: EnqueueBurst,
  idEnqueues?: PostgresIdEnqueues,
): Promise<EnqueueResult> {
  const normalized = normalize(input);
  // Without an id or key there is nothing to look up first (SQLite looks an id up in the burst's transaction).
  if (burst?.takes(normalized)) return burst.enqueue(queue, normalized);
  // PostgreSQL, an id without a key: the unique index looks it up, in a statement shared with the queue's others.
  if (idEnqueues && PostgresIdEnqueues.takes(normalized)) return idEnqueues.enqueue(queue, normalized);
  return enqueueNormalized(store, queue, normalized);
}

/** One job, looked up by id and key first; the path every dialect takes. */
export async function enqueueNormalized(store: Store, queue: string, normalized: NormalizedEnqueueInput): Promise<EnqueueResult> {
  const result = await withRetry("enqueue", () =>
    // The parents' marks and the insert commit together (dependencies.ts).
    normalized.dependsOn.length > 0
      ? store.knex.transaction((trx) => insertOrFind(store, trx, queue, normalized, true))
      : insertOrFind(store, store.knex, queue, normalized, false),
  );
  if (result.created && normalized.id) await advanceIdCounter(store, store.knex, [normalized.id]);
  return result;
}

/** All-or-nothing: every input is validated before the transaction writes the first row. */
export async function enqueueMany(store: Store, queue: string, inputs: EnqueueInput[]): Promise<EnqueueResult[]> {
  const normalized = inputs.map(normalize);
  const results = await withRetry("enqueueBulk", async () => {
    if (store.layout.insertReturning && !normalized.some((input) => mayNameARowId(input) || input.dependsOn.length > 0)) {
      try {
        const fast = await store.knex.transaction((trx) => insertBulk(store, trx, queue, normalized));
        if (fast) return fast;
      } catch (error) {
        // Another enqueue took an id or key since it was looked up: the row-by-row path settles who won.
        if (!isUniqueViolation(error)) throw error;
      }
    }
    return store.knex.transaction(async (trx) => {
      const out: EnqueueResult[] = [];
      for (const input of normalized) out.push(await insertOrFind(store, trx, queue, input, true));
      return out;
    });
  });
  const chosenIds = normalized.flatMap((input, i) => (input.id && results[i]?.created ? [input.id] : []));
  await advanceIdCounter(store, store.knex, chosenIds);
  return results;
}

/**
 * A caller-chosen id that could also be the row id of a job written earlier in the same bulk: only
 * the row-by-row path, which writes one row before it looks up the next id, answers it rightly.
 */
const mayNameARowId = (input: NormalizedEnqueueInput) => input.id !== undefined && /^[1-9][0-9]{0,9}$/.test(input.id);

/**
 * A bulk in one multi-row insert: the ids and unique keys it names are looked up first (one read),
 * inputs repeating an earlier one's id or key get that job, as they would one at a time, and the
 * rest are written by one statement per chunk. Answers null when a key is held by a row a legacy
 * daemon finished, which only the row-by-row path releases.
 */
async function insertBulk(
  store: Store,
  trx: Knex.Transaction,
  queue: string,
  inputs: NormalizedEnqueueInput[],
): Promise<EnqueueResult[] | null> {
  const now = store.now();
  const ids = inputs.flatMap((input) => (input.id === undefined ? [] : [input.id]));
  const keys = inputs.flatMap((input) => (input.uniqueKey === undefined ? [] : [input.uniqueKey]));
  const byId = ids.length > 0 ? await findRows(store, trx, queue, ids) : new Map<string, JobRow>();
  const byKey = new Map<string, JobRow>();
  if (keys.length > 0) {
    for (const holder of await findByUniqueKeys(store, trx, queue, keys)) {
      if (!(holder.status === STATUS.pending || (ACTIVE_STATUSES as string[]).includes(holder.status ?? ""))) return null;
      byKey.set(holder.sy_unique_slot as string, holder);
    }
  }
  /** Per input: the row it found, or which new row is its job and whether it is the one that wrote it. */
  const answers: Array<{ found: JobRow } | { fresh: number; created: boolean }> = [];
  const fresh: Array<Record<string, unknown>> = [];
  const earlierId = new Map<string, number>();
  const earlierKey = new Map<string, number>();
  // As one at a time: the id is looked up (in the store, then among this bulk's new rows), then the key.
  const hit = (stored: Map<string, JobRow>, earlier: Map<string, number>, value: string | undefined) => {
    if (value === undefined) return undefined;
    const row = stored.get(value);
    if (row) return { found: row };
    const index = earlier.get(value);
    return index === undefined ? undefined : { fresh: index, created: false };
  };
  for (const input of inputs) {
    const existing = hit(byId, earlierId, input.id) ?? hit(byKey, earlierKey, input.uniqueKey);
    if (existing) {
      answers.push(existing);
      continue;
    }
    const index = fresh.length;
    fresh.push(enqueueRow(store, queue, input, runAtOf(input, now), now));
    answers.push({ fresh: index, created: true });
    if (input.id !== undefined) earlierId.set(input.id, index);
    if (input.uniqueKey !== undefined) earlierKey.set(input.uniqueKey, index);
  }
  const stored = fresh.length > 0 ? await insertReturning(store, trx, fresh) : [];
  return answers.map((answer) =>
    "found" in answer
      ? { job: rowToJob(store, answer.found, now), created: false }
      : { job: rowToJob(store, stored[answer.fresh] as JobRow, now), created: answer.created },
  );
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
  const now = store.now();
  const existing = await findExisting(store, db, queue, input);
  if (existing) return { job: rowToJob(store, existing, now), created: false };
  // With dependencies, db is a transaction (enqueueNormalized, enqueueMany).
  const blocked = input.dependsOn.length > 0 && (await markUnfinishedParents(store, db as Knex.Transaction, queue, input.dependsOn));
  const row = enqueueRow(store, queue, input, runAtOf(input, now), now, blocked);
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
  if (store.layout.insertReturning) {
    const [inserted] = await insertReturning(store, db, [row]);
    if (!inserted) throw new Error("workerqueue-sql: the insert returned no row");
    return inserted;
  }
  const [id] = (await db(store.table).insert(row)) as number[];
  return rowById(store, db, Number(id));
}

/** Bound parameters per statement stay under every dialect's limit (SQLite's is 32,766). */
const MAX_BINDINGS = 30_000;

/** What an import wrote or found, by job id: the rows ImportResult.held is made of. */
type HeldRows = Map<string, JobRow>;

/**
 * The rows of a chunk whose multi-row insert met a unique index: a concurrent import of the same
 * job (skipped, as if it had been there) or a unique key another job of the queue holds (refused).
 */
async function importOneByOne(
  store: Store,
  trx: Knex.Transaction,
  queue: string,
  jobs: Job[],
  now: number,
  outcome: ImportResult,
  held: HeldRows,
) {
  for (const job of jobs) {
    try {
      held.set(job.id, await trx.transaction((savepoint) => insertRow(store, savepoint, importRow(store, queue, job, now))));
      outcome.imported++;
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      await skipOrRefuse(store, trx, queue, job, outcome, held);
    }
  }
}

/** A job a unique index refused: skipped when the queue holds its id, else its unique key is another job's. */
async function skipOrRefuse(store: Store, trx: Knex.Transaction, queue: string, job: Job, outcome: ImportResult, held: HeldRows) {
  const holder = await findRow(store, trx, queue, job.id, true);
  if (holder) {
    outcome.skipped.push(job.id);
    held.set(job.id, holder);
    return;
  }
  throw new ConflictError(`workerqueue-sql: job ${job.id} has the unique key of another job of ${queue}`, {
    id: job.id,
    uniqueKey: job.uniqueKey,
  });
}

/**
 * PostgreSQL and SQLite: one plain multi-row insert per chunk, answering the rows it wrote. A unique
 * index that refuses one aborts the transaction (PostgreSQL), so the caller then runs the page again
 * with importSkippingConflicts.
 */
async function importAtOnce(
  store: Store,
  trx: Knex.Transaction,
  queue: string,
  jobs: Job[],
  now: number,
  outcome: ImportResult,
  held: HeldRows,
) {
  const written = await insertReturning(
    store,
    trx,
    jobs.map((job) => importRow(store, queue, job, now)),
    heldColumns(store),
  );
  jobs.forEach((job, i) => held.set(job.id, written[i] as JobRow));
  outcome.imported += jobs.length;
}

/**
 * PostgreSQL and SQLite, once a plain insert met a unique index: `insert ... on conflict do nothing`
 * per chunk, which answers the rows it wrote; a row it did not write is settled as importOneByOne
 * would (the same job imported meanwhile, or twice in the page: skipped; another job's unique key: refused).
 */
async function importSkippingConflicts(
  store: Store,
  trx: Knex.Transaction,
  queue: string,
  jobs: Job[],
  now: number,
  outcome: ImportResult,
  held: HeldRows,
) {
  const written = await insertSkippingConflicts(
    store,
    trx,
    jobs.map((job) => importRow(store, queue, job, now)),
    heldColumns(store),
  );
  const byId = new Map(written.map((row) => [String(row.sy_job_id), row]));
  for (const job of jobs) {
    const row = byId.get(job.id);
    if (row) {
      byId.delete(job.id);
      held.set(job.id, row);
      outcome.imported++;
    } else await skipOrRefuse(store, trx, queue, job, outcome, held);
  }
}

/**
 * MySQL/MariaDB: a multi-row insert per chunk in a savepoint, a refused chunk redone row by row.
 * MariaDB's INSERT ... RETURNING answers the rows; MySQL's are not read back (no `held` then).
 */
async function importInChunks(
  store: Store,
  trx: Knex.Transaction,
  queue: string,
  jobs: Job[],
  now: number,
  outcome: ImportResult,
  held: HeldRows,
) {
  const rows = jobs.map((job) => importRow(store, queue, job, now));
  const columns = Math.max(1, ...rows.map((row) => Object.keys(row).length));
  const perInsert = Math.max(1, Math.floor(MAX_BINDINGS / columns));
  for (let start = 0; start < jobs.length; start += perInsert) {
    const chunk = jobs.slice(start, start + perInsert);
    const chunkRows = rows.slice(start, start + perInsert);
    try {
      await trx.transaction(async (savepoint) => {
        if (!store.layout.insertReturning) return insertPlain(store, savepoint, chunkRows);
        const stored = await insertReturning(store, savepoint, chunkRows, heldColumns(store));
        chunk.forEach((job, i) => held.set(job.id, stored[i] as JobRow));
      });
      outcome.imported += chunk.length;
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      await importOneByOne(store, trx, queue, chunk, now, outcome, held);
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
  /**
   * Whether the ids must be looked up before the insert: a numeric id may name a legacy row (by its
   * row id), and the default queue holds rows without `sy_queue`, which no unique index sees. Any
   * other id the queue holds makes the plain insert fail on (sy_queue, sy_job_id), and the page is
   * then written again with the look-up.
   */
  const mustLookUp = queue === store.defaultQueue || checked.some((job) => /^[1-9][0-9]{0,9}$/.test(job.id));
  const importPage = (write: typeof importAtOnce, lookUp: boolean) =>
    store.knex.transaction(async (trx) => {
      const outcome: ImportResult = { imported: 0, skipped: [] };
      const now = store.now();
      const held: HeldRows = lookUp
        ? await findRows(
            store,
            trx,
            queue,
            checked.map((job) => job.id),
          )
        : new Map();
      const fresh = checked.filter((job) => {
        if (held.has(job.id)) outcome.skipped.push(job.id);
        return !held.has(job.id);
      });
      if (fresh.length > 0) await write(store, trx, queue, fresh, now, outcome, held);
      await markImportedParents(store, trx, queue, fresh);
      // What the statements that wrote (or found) each job answered, so a migration need not read the page back.
      if (checked.every((job) => held.has(job.id))) outcome.held = checked.map((job) => heldJobOf(held.get(job.id) as JobRow, now));
      return outcome;
    });
  const result = await withRetry("import", async () => {
    if (store.dialect === "mysql") return importPage(importInChunks, true);
    try {
      return await importPage(importAtOnce, mustLookUp);
    } catch (error) {
      // A job the queue holds, imported meanwhile or twice in the page, or a unique key another job holds: settled one by one.
      if (!isUniqueViolation(error)) throw error;
      return importPage(importSkippingConflicts, true);
    }
  });
  const skipped = new Set(result.skipped);
  await advanceIdCounter(
    store,
    store.knex,
    checked.filter((job) => !skipped.has(job.id)).map((job) => job.id),
  );
  return result;
}
