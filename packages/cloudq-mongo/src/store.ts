import { BackendUnavailableError, ValidationError, isConnectionError } from "@switchyard/core";
import type { Collection, UpdateFilter } from "mongodb";
import type { CloudqDocument } from "./document.js";
import type { ResolvedLayout } from "./options.js";
import type { RecurrenceDocument } from "./recurring.js";

/** What every operation works on: the shared jobs collection, the side collections, the layout. */
export interface Store {
  readonly jobs: Collection<CloudqDocument>;
  readonly paused: Collection<{ _id: string; pausedAt: Date }>;
  /** Recurring jobs' definitions (core's RecurringJobs), one document per recurrence. */
  readonly recurring: Collection<RecurrenceDocument>;
  /** Claim tokens `{_id: "<job _id>:<attempt>", at}`; see reserve.ts. Empty between claims. */
  readonly claims: Collection<{ _id: string; at: Date }>;
  readonly layout: ResolvedLayout;
  /** The backend's clock (the `clock` option): epoch ms. */
  readonly now: () => number;
  /** What ready() learned of the server. */
  readonly server: ServerTraits;
}

export interface ServerTraits {
  /**
   * The server reads and decodes every document of the collection for a `find` filter other than
   * equalities on top-level fields (FerretDB 1.x: its `find` hands PostgreSQL only those, its
   * `distinct` equalities on nested fields too, neither an `$in` or `$or`), so a job is looked up
   * by equalities (reads.ts). A lookup by `$or` took 1 ms at 10 documents and 120 ms at 2,000.
   */
  equalitiesOnly: boolean;
}

/** FerretDB answers buildInfo with its own version beside the MongoDB one it speaks. */
export function traitsOf(buildInfo: { ferretdbVersion?: unknown }): ServerTraits {
  return { equalitiesOnly: /^v?1\./.test(String(buildInfo.ferretdbVersion ?? "")) };
}

/** Network and server-selection failures become BackendUnavailableError naming the operation; typed errors pass through. */
export async function guarded<T>(what: string, operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (error) {
    if (isConnectionError(error)) {
      throw new BackendUnavailableError(`cloudq-mongo: ${what} failed: ${(error as Error).message}`, { cause: error });
    }
    throw error;
  }
}

/** The driver cannot type dotted sub-document paths such as `switchyard.lease`; updates are plain records. */
export function update(fields: Record<string, unknown>): UpdateFilter<CloudqDocument> {
  return fields as UpdateFilter<CloudqDocument>;
}
