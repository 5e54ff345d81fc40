import type { JobState } from "@switchyard/core";
import { NATIVE } from "./document.js";
import type { StateField } from "./options.js";

type Filter = Record<string, unknown>;

/** A queued job is due when it has no run-at time (every legacy document) or it has passed. */
function dueClause(now: number): Filter[] {
  return [{ "switchyard.runAt": null }, { "switchyard.runAt": { $lte: now } }];
}

/**
 * What reserve() may claim: a queued job that is due, or a reserved job whose lease has expired
 * (its worker died; the attempt is counted again). A job a legacy server reserved carries no
 * lease and is never taken back: that server's worker may still be running it.
 */
export function claimableFilter(queue: string, stateField: StateField, now: number): Filter {
  return {
    queue,
    $or: [
      ...dueClause(now).map((due) => ({ [stateField]: NATIVE.queued, ...due })),
      { [stateField]: NATIVE.reserved, "switchyard.lease.expiresAt": { $lt: now } },
    ],
  };
}

/**
 * claimableFilter as one filter per native state, each naming its state by an equality: expired
 * leases, then due queued jobs, in reserve order (reserveSort orders by state first). For servers
 * that read every document of the collection for anything but equalities (ServerTraits), which
 * then read only the queue's documents in that state rather than every document of the queue.
 */
export function claimableByState(queue: string, stateField: StateField, now: number): [Filter, Filter] {
  return [
    { queue, [stateField]: NATIVE.reserved, "switchyard.lease.expiresAt": { $lt: now } },
    { queue, [stateField]: NATIVE.queued, $or: dueClause(now) },
  ];
}

/**
 * The reserve order: expired leases first (`reserved` sorts after `queued`, so descending), then
 * priority (boost descending, demote ascending: a document with neither sorts as priority 0), then
 * first in, first out by `inserted_at` as node-cloudq 0.2 sorts, then `_id` for jobs inserted in
 * the same millisecond. Legacy Ruby documents have no `inserted_at` and so come first among equals.
 */
export function reserveSort(stateField: StateField): Record<string, 1 | -1> {
  return { [stateField]: -1, "switchyard.boost": -1, "switchyard.demote": 1, inserted_at: 1, _id: 1 };
}

/** Every state value that maps to a core state of its own; any other value (or none) reads as canceled. */
const KNOWN_STATES = [NATIVE.queued, NATIVE.reserved, NATIVE.deleted, NATIVE.failed, NATIVE.blocked];

/**
 * The filter selecting the jobs of one core state. `canceled` is "none of the other values", as
 * coreStateOf() reads it: a document with a state no Mongo-era server writes, or without the
 * state field at all (a `workflow_state` document read with the `queue_state` layout), is never
 * handed out, and list and counts show it where get() does.
 */
export function stateFilter(queue: string, stateField: StateField, state: JobState, now: number): Filter | null {
  switch (state) {
    case "waiting":
      return { queue, [stateField]: NATIVE.queued, $or: dueClause(now) };
    case "delayed":
      return { queue, [stateField]: NATIVE.queued, "switchyard.runAt": { $gt: now } };
    case "active":
      return { queue, [stateField]: NATIVE.reserved };
    case "completed":
      return { queue, [stateField]: NATIVE.deleted };
    case "failed":
      return { queue, [stateField]: NATIVE.failed };
    case "canceled":
      return { queue, [stateField]: { $nin: KNOWN_STATES } };
    case "blocked":
      return { queue, [stateField]: NATIVE.blocked };
  }
}

/** The native state value each core state is written as (completed only in mark-deleted mode). */
export function nativeStateFor(state: JobState): string {
  switch (state) {
    case "waiting":
    case "delayed":
    case "active":
      return NATIVE.queued;
    case "blocked":
      return NATIVE.blocked;
    case "completed":
      return NATIVE.deleted;
    case "failed":
      return NATIVE.failed;
    case "canceled":
      return NATIVE.canceled;
  }
}
