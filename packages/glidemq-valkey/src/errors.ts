import { BackendUnavailableError, isSwitchyardError } from "@switchyard/core";

/** Socket errors of a lost or unreachable server (Node's error codes). */
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
]);
/**
 * ioredis's own texts for a connection it lost or cannot use, and the server replies that mean "not
 * now" rather than "wrong request" (a cluster without quorum, a server still loading its data).
 */
const CONNECTION_MESSAGE =
  /Connection is closed|Stream isn't writeable|max retries per request|None of startup nodes is available|Failed to refresh slots cache|Command timed out|^CLUSTERDOWN|^TRYAGAIN|^LOADING|^MASTERDOWN/i;
const CONNECTION_ERROR_NAMES = new Set(["MaxRetriesPerRequestError", "ClusterAllFailedError"]);

export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as NodeJS.ErrnoException).code;
  return (
    (code !== undefined && CONNECTION_CODES.has(code)) || CONNECTION_ERROR_NAMES.has(error.name) || CONNECTION_MESSAGE.test(error.message)
  );
}

/** A connection problem becomes BackendUnavailableError (the original as its cause); anything else is left as it is. */
export function toBackendError(error: unknown): unknown {
  if (isSwitchyardError(error) || !isConnectionError(error)) return error;
  return new BackendUnavailableError(`glidemq-valkey: Valkey/Redis is unavailable: ${(error as Error).message}`, { cause: error });
}

/**
 * The same object with every method run through one guard that types connection errors, so no
 * operation can leak a plain ioredis `Error` to the caller, whichever call inside it failed.
 */
export function guardOperations<T extends object>(target: T): T {
  const guarded: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(target)) {
    if (typeof value !== "function") {
      guarded[name] = value;
      continue;
    }
    guarded[name] = async (...args: unknown[]) => {
      try {
        return await value.apply(target, args);
      } catch (error) {
        throw toBackendError(error);
      }
    };
  }
  return guarded as T;
}
