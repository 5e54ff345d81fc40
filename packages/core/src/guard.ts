import type { z } from "zod";
import type { Backend } from "./backend.js";
import { BackendUnavailableError, ValidationError, isSwitchyardError } from "./errors.js";
import { ExportOptionsSchema, JobIdSchema, ListOptionsSchema, QueueNameSchema, ReserveOptionsSchema } from "./inputs.js";
import { PrioritySchema, TagsSchema } from "./job.js";
import { wrapMethods } from "./methods.js";
import { RecurrenceSchema } from "./recurrence.js";
import { parseOrThrow } from "./validate.js";

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
  "57P02", // PostgreSQL: another server process crashed, so every connection was ended
  "57P03", // PostgreSQL: the server is starting up, shutting down or in recovery
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
 * The drivers' texts for a connection they lost or cannot use (pg's pooled client whose server went
 * away: "Connection terminated unexpectedly", then "... is not queryable"), and server replies that
 * mean "not now" rather than "wrong request" (a Redis cluster without quorum or moving slots during a
 * failover, which ioredis gives up on as "Too many Cluster redirections", a server still loading).
 */
const CONNECTION_MESSAGE =
  /Connection is closed|Connection terminated|is not queryable|Too many Cluster redirections|Stream isn't writeable|max retries per request|None of startup nodes is available|Failed to refresh slots cache|Command timed out|^CLUSTERDOWN|^TRYAGAIN|^LOADING|^MASTERDOWN|Knex: Timeout acquiring a connection|Cannot open database|unable to open database/i;

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

/** The inputs every operation shares, checked with the core's schemas before any adapter code runs. */
const QUEUE_FIRST = new Set([
  "enqueue",
  "enqueueBulk",
  "reserve",
  "list",
  "counts",
  "pause",
  "resume",
  "isPaused",
  "export",
  "import",
  "getMany",
  "remove",
  "dependentsOf",
  "recurrences",
]);
const QUEUE_AND_ID = new Set([
  "heartbeat",
  "complete",
  "completeAndReserve",
  "fail",
  "cancel",
  "get",
  "setProgress",
  "setPriority",
  "setTags",
  "setData",
  "replace",
  "addDependencies",
  "removeDependencies",
]);
/** Operations on recurring jobs, whose ids are the store's, not a queue's. */
const RECURRENCE_ID_FIRST = new Set(["recurrence", "removeRecurrence", "advanceRecurrence"]);

function checkText(schema: z.ZodType, value: unknown, adapter: string): void {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ValidationError(`${adapter}: ${parsed.error.issues.map((issue) => issue.message).join("; ")}`);
}

/**
 * Queue names that passed QueueNameSchema lately: the same few come with nearly every call, and the
 * check depends on the name alone. Bounded, so a stream of distinct names cannot grow it.
 */
const CHECKED_QUEUE_NAMES = new Set<string>();
const MAX_CHECKED_QUEUE_NAMES = 1024;

function checkQueueName(value: unknown, adapter: string): void {
  if (typeof value === "string" && CHECKED_QUEUE_NAMES.has(value)) return;
  checkText(QueueNameSchema, value, adapter);
  if (CHECKED_QUEUE_NAMES.size >= MAX_CHECKED_QUEUE_NAMES) CHECKED_QUEUE_NAMES.clear();
  CHECKED_QUEUE_NAMES.add(value as string);
}

function checkInputs(adapter: string, operation: string, args: unknown[]): void {
  if (QUEUE_FIRST.has(operation) || QUEUE_AND_ID.has(operation)) checkQueueName(args[0], adapter);
  if (QUEUE_AND_ID.has(operation)) checkText(JobIdSchema, args[1], adapter);
  if (RECURRENCE_ID_FIRST.has(operation)) checkText(JobIdSchema, args[0], adapter);
  if (operation === "putRecurrence") parseOrThrow(RecurrenceSchema, args[0], `${adapter} recurrence`);
  if (operation === "reserve") parseOrThrow(ReserveOptionsSchema, args[1], `${adapter} reserve options`);
  if (operation === "completeAndReserve") parseOrThrow(ReserveOptionsSchema, args[3], `${adapter} reserve options`);
  if (operation === "list") parseOrThrow(ListOptionsSchema, args[1], `${adapter} list options`);
  if (operation === "export" && args[1] !== undefined) parseOrThrow(ExportOptionsSchema, args[1], `${adapter} export options`);
  if (operation === "setPriority") parseOrThrow(PrioritySchema, args[2], `${adapter} priority`);
  if (operation === "setTags") parseOrThrow(TagsSchema, args[2], `${adapter} tags`);
  if (operation === "getMany" || operation === "remove" || operation === "dependentsOf") {
    if (!Array.isArray(args[1])) throw new ValidationError(`${adapter}: ${operation} takes an array of ids`);
    for (const id of args[1]) checkText(JobIdSchema, id, adapter);
  }
  if ((operation === "enqueueBulk" || operation === "import") && !Array.isArray(args[1])) {
    throw new ValidationError(`${adapter}: ${operation} takes an array of jobs`);
  }
}

/**
 * The backend with every operation run through one guard: the inputs all operations share (queue
 * names, ids, reserve, list and export options) are checked with the core's schemas first, and a
 * driver's connection error becomes BackendUnavailableError, whichever call inside failed. Each
 * adapter still checks what only its store refuses, and maps its other driver errors (a refused
 * value, a unique index) itself, where it knows what they mean.
 */
export function guardBackend<B extends Backend>(adapter: string, backend: B): B {
  return wrapMethods(backend, (operation, method, target) => (...args: unknown[]) => {
    try {
      checkInputs(adapter, operation, args);
      const result = method.apply(target, args);
      return result instanceof Promise ? result.catch((error: unknown) => Promise.reject(toBackendError(adapter, error))) : result;
    } catch (error) {
      // An operation's promise rejects; it never throws synchronously at its caller.
      return Promise.reject(toBackendError(adapter, error));
    }
  });
}
