import { BackendUnavailableError, isSwitchyardError } from "@switchyard/core";

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

/** Lock contention the database asks us to retry: deadlock, lock timeout, a busy SQLite file. */
function isTransient(error: unknown): boolean {
  const e = error as DriverError;
  return (
    e?.code === "40P01" ||
    e?.code === "40001" ||
    e?.errno === 1213 ||
    e?.errno === 1205 ||
    e?.code === "SQLITE_BUSY" ||
    e?.code === "SQLITE_BUSY_SNAPSHOT" ||
    e?.code === "SQLITE_LOCKED"
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
      if (isConnectionError(error)) {
        throw new BackendUnavailableError(`workerqueue-sql: ${what} failed: ${(error as Error).message}`, { cause: error });
      }
      throw error;
    }
  }
}

export function isConnectionError(error: unknown): boolean {
  const e = error as DriverError;
  return (
    ["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENOTFOUND", "PROTOCOL_CONNECTION_LOST", "57P01", "SQLITE_CANTOPEN"].includes(
      e?.code ?? "",
    ) || /Knex: Timeout acquiring a connection|Cannot open database|unable to open database/.test(e?.message ?? "")
  );
}
