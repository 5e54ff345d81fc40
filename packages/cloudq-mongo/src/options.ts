import { ValidationError, parseOrThrow } from "@switchyard/core";
import type { MongoClient } from "mongodb";
import { z } from "zod";

/** The state field each generation of Cloudq server reads and writes (see the spec, §5). */
export const STATE_FIELDS = ["queue_state", "workflow_state"] as const;
export type StateField = (typeof STATE_FIELDS)[number];

/**
 * What DELETE (complete) does to the document: node-cloudq 0.0.5+ removes it; the Ruby server and
 * node-cloudq 0.0.1-0.0.4 keep it with the state `deleted`.
 */
export const COMPLETION_MODES = ["remove", "mark-deleted"] as const;
export type CompletionMode = (typeof COMPLETION_MODES)[number];

export const LayoutOptionsSchema = z.strictObject({
  /** Database shared with the legacy servers: this, else the one the URL names, else `cloudq` (every Mongo-era default). */
  database: z.string().min(1).optional(),
  /** Collection of job documents; MongoMapper named it `cloudq.jobs` and node-cloudq followed. */
  collection: z.string().min(1).default("cloudq.jobs"),
  /** Side collection holding one `{_id: <queue>}` document per paused queue (legacy servers ignore it). */
  pausedCollection: z.string().min(1).default("cloudq.paused"),
  /** Side collection of recurring jobs' definitions, one document per recurrence (see recurring.ts; legacy servers ignore it). */
  recurringCollection: z.string().min(1).default("cloudq.recurring"),
  /** Side collection of short-lived claim tokens that make reserve exclusive on any server (see reserve.ts). */
  claimsCollection: z.string().min(1).default("cloudq.claims"),
  /**
   * Guard each claim with a token insert. Needed where updates are not atomic (FerretDB 1.x); on
   * MongoDB an update is atomic on its own and this may be turned off to save the token inserts.
   */
  claimTokens: z.boolean().default(true),
  /**
   * How long the candidates of one sorted find may serve the reserves of this backend (a pool per
   * queue, whose claim tokens are taken a few at a time ahead of the reserves): a reserve then
   * costs the pause check and the claim, two commands. A job that becomes runnable through another
   * process (enqueued there with a higher priority, a lease or a delay running out) may wait this
   * long behind older candidates; 0 keeps the order strict at the price of a sorted find and a
   * token insert per reserve().
   */
  candidateTtlMs: z.number().int().nonnegative().default(0),
  stateField: z.enum(STATE_FIELDS).default("queue_state"),
  completion: z.enum(COMPLETION_MODES).default("remove"),
  /** Create the indexes in ready(); turn off where the application user may not create indexes. */
  createIndexes: z.boolean().default(true),
});

export type CloudqLayoutOptions = z.input<typeof LayoutOptionsSchema>;
export type ResolvedLayout = z.output<typeof LayoutOptionsSchema> & { database: string };

/**
 * Either a connection string (the backend owns and closes the client) or a client the caller owns;
 * `clock` is the current time in epoch ms (default `Date.now`) for what the documents record and for
 * what is due, delayed or expired (no update takes the server's time).
 */
export type CloudqBackendOptions = CloudqLayoutOptions & { clock?: () => number } & (
    | { url: string; client?: never }
    | { client: MongoClient; url?: never }
  );

/** Validates everything but the connection; bad configuration is a ValidationError before any I/O. */
export function resolveLayout(options: CloudqBackendOptions): ResolvedLayout {
  const { url, client, clock: _clock, ...layout } = options;
  if ((url === undefined) === (client === undefined)) {
    throw new ValidationError("cloudq-mongo: pass exactly one of `url` or `client`");
  }
  const resolved = parseOrThrow(LayoutOptionsSchema, layout, "cloudq-mongo options");
  return { ...resolved, database: resolved.database ?? (url ? databaseInUrl(url) : undefined) ?? "cloudq" };
}

/** The database a connection string names (`mongodb://host/cloudq`), as MONGOHQ_URL-style URLs did. */
function databaseInUrl(url: string): string | undefined {
  const match = /^mongodb(?:\+srv)?:\/\/[^/]*\/([^?]+)/.exec(url);
  return match?.[1] ? decodeURIComponent(match[1]) : undefined;
}
