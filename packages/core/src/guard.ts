import type { Backend } from "./backend.js";
import { BackendUnavailableError, isSwitchyardError } from "./errors.js";

/** Node's socket error codes, and the drivers' own, for a server that is gone or unreachable. */
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "PROTOCOL_CONNECTION_LOST", // mysql2
  "57P01", // PostgreSQL: the server was shut down under the connection
  "SQLITE_CANTOPEN",
]);

/** Error classes the drivers throw when the server cannot be reached (ioredis, mongodb). */
const CONNECTION_ERROR_NAMES = new Set([
  "MaxRetriesPerRequestError",
  "ClusterAllFailedError",
  "MongoNetworkError",
  "MongoNetworkTimeoutError",
  "MongoServerSelectionError",
  "MongoTopologyClosedError",
  "MongoNotConnectedError",
]);

/**
 * The drivers' texts for a connection they lost or cannot use, and server replies that mean "not
 * now" rather than "wrong request" (a Redis cluster without quorum, a server still loading).
 */
const CONNECTION_MESSAGE =
  /Connection is closed|Stream isn't writeable|max retries per request|None of startup nodes is available|Failed to refresh slots cache|Command timed out|^CLUSTERDOWN|^TRYAGAIN|^LOADING|^MASTERDOWN|Knex: Timeout acquiring a connection|Cannot open database|unable to open database/i;

/** Whether a driver's error means the store is unreachable (duck-typed: no driver is imported). */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  return (
    (typeof code === "string" && CONNECTION_CODES.has(code)) ||
    CONNECTION_ERROR_NAMES.has(error.name) ||
    CONNECTION_MESSAGE.test(error.message)
  );
}

/** A connection failure becomes BackendUnavailableError (the driver's error as its cause); anything else is left as it is. */
export function toBackendError(adapter: string, error: unknown): unknown {
  if (isSwitchyardError(error) || !isConnectionError(error)) return error;
  return new BackendUnavailableError(`${adapter}: the store is unavailable: ${(error as Error).message}`, { cause: error });
}

/**
 * The backend with every operation run through toBackendError, so that no operation can leak a
 * driver's connection error to the caller, whichever call inside it failed. Each adapter maps its
 * other driver errors (a refused value, a unique index) itself, where it knows what they mean.
 */
export function guardBackend<B extends Backend>(adapter: string, backend: B): B {
  return new Proxy(backend, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        try {
          const result = value.apply(target, args);
          return result instanceof Promise ? result.catch((error: unknown) => Promise.reject(toBackendError(adapter, error))) : result;
        } catch (error) {
          throw toBackendError(adapter, error);
        }
      };
    },
  });
}
