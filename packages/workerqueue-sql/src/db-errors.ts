import { BackendUnavailableError, ValidationError, isConnectionError, isSwitchyardError } from "@switchyard/core";
import { isStalePreparedPlan } from "./postgres-prepared.js";

interface DriverError {
  code?: string;
  errno?: number;
  message?: string;
}

/** A unique index refused the row: another enqueue with the same key or id got there first. */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as DriverError;
  return e?.code === "23505" || e?.errno === 1062 || e?.code === "ER_DUP_ENTRY" || e?.code === "SQLITE_CONSTRAINT_UNIQUE";
}

/**
 * The database refused a value: PostgreSQL's class 22 (data exception: too long, out of range, NUL in
 * text, bad number syntax), MySQL's data too long (1406), out of range (1264), incorrect value (1366),
 * truncated (1265). The caller gave it, so it is a ValidationError, not a server fault.
 */
function isRefusedValue(error: unknown): boolean {
  const e = error as DriverError;
  return (typeof e?.code === "string" && /^22[0-9A-Z]{3}$/.test(e.code)) || [1406, 1264, 1366, 1265].includes(e?.errno ?? 0);
}

/**
 * What the database asks us to retry: lock contention (deadlock, lock timeout, a busy SQLite file),
 * and a prepared statement whose table changed its columns (dropped then, postgres-prepared.ts).
 */
function isTransient(error: unknown): boolean {
  const e = error as DriverError;
  return (
    e?.code === "40P01" ||
    e?.code === "40001" ||
    e?.errno === 1213 ||
    e?.errno === 1205 ||
    e?.code === "SQLITE_BUSY" ||
    e?.code === "SQLITE_BUSY_SNAPSHOT" ||
    e?.code === "SQLITE_LOCKED" ||
    isStalePreparedPlan(error)
  );
}

/**
 * Runs an operation (a whole transaction), retrying it when the database resolved a lock conflict by
 * aborting it. Connection failures become BackendUnavailableError; typed errors pass through.
 */
export async function withRetry<T>(what: string, operation: () => Promise<T>, attempts = 8): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await operation();
    } catch (error) {
      if (isSwitchyardError(error)) throw error;
      if (isTransient(error) && attempt < attempts) {
        await new Promise((resolve) => setTimeout(resolve, 5 * attempt + Math.random() * 20));
        continue;
      }
      throw typedError(what, error);
    }
  }
}

/** A driver's error as the caller should see it: a refused value is a ValidationError, a lost server BackendUnavailableError. */
export function typedError(what: string, error: unknown): unknown {
  if (isSwitchyardError(error)) return error;
  if (isRefusedValue(error)) {
    const reason = String((error as DriverError).message ?? "")
      .split(" - ")
      .pop();
    return new ValidationError(`workerqueue-sql: ${what}: the database refused a value: ${reason}`);
  }
  if (isConnectionError(error)) {
    return new BackendUnavailableError(`workerqueue-sql: ${what} failed: ${(error as Error).message}`, { cause: error });
  }
  return error;
}

/**
 * Whether a statement that failed with this error wrote nothing, so each caller of a group may be
 * sent again alone to get its own answer: a value or a lock the server refused. A connection lost
 * (or the store unreachable) may have committed it, so its callers get that error instead.
 */
export function wroteNothing(error: unknown): boolean {
  return !(error instanceof BackendUnavailableError) && !isConnectionError(error);
}
