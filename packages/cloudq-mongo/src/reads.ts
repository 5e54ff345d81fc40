import {
  type Job,
  type JobCounts,
  type JobState,
  type Page,
  ValidationError,
  decodeCursor,
  emptyCounts,
  encodeCursor,
} from "@switchyard/core";
import { ObjectId } from "mongodb";
import { documentToJob } from "./document.js";
import { jobFilter } from "./ids.js";
import { stateFilter } from "./queries.js";
import type { Store } from "./store.js";

const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

export async function getJob(store: Store, queue: string, id: string): Promise<Job | null> {
  const document = await store.jobs.findOne(jobFilter(queue, id));
  return document ? documentToJob(document, store.layout.stateField) : null;
}

/** One countDocuments per state, each served by the (queue, state, ...) index. */
export async function countJobs(store: Store, queue: string): Promise<JobCounts> {
  const now = Date.now();
  const counts = emptyCounts();
  const states = Object.keys(counts) as JobState[];
  await Promise.all(
    states.map(async (state) => {
      const filter = stateFilter(queue, store.layout.stateField, state, now);
      counts[state] = filter ? await store.jobs.countDocuments(filter) : 0;
    }),
  );
  return counts;
}

/**
 * Pages in `_id` order with the last `_id` seen as the cursor: stable while jobs come and go, and
 * every document Switchyard or a Mongo-era server writes has an ObjectId `_id`.
 */
export async function pageJobs(
  store: Store,
  filter: Record<string, unknown> | null,
  limit = DEFAULT_PAGE,
  cursor?: string,
): Promise<Page<Job>> {
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new ValidationError(`cloudq-mongo: limit must be an integer from 1 to ${MAX_PAGE}`, { limit });
  }
  const after = decodeCursor(cursor, (value): value is string => typeof value === "string" && ObjectId.isValid(value));
  if (!filter) return { items: [], cursor: null };
  const query = after === undefined ? filter : { $and: [filter, { _id: { $gt: new ObjectId(after) } }] };
  const documents = await store.jobs
    .find(query)
    .sort({ _id: 1 })
    .limit(limit + 1)
    .toArray();
  const page = documents.slice(0, limit);
  const now = Date.now();
  const last = page.at(-1);
  return {
    items: page.map((document) => documentToJob(document, store.layout.stateField, now)),
    cursor: documents.length > limit && last ? encodeCursor(last._id.toHexString()) : null,
  };
}

export function listFilter(store: Store, queue: string, state: JobState): Record<string, unknown> | null {
  return stateFilter(queue, store.layout.stateField, state, Date.now());
}

export async function queueNames(store: Store): Promise<string[]> {
  const names = await store.jobs.distinct("queue");
  return names.filter((name): name is string => typeof name === "string").sort();
}
