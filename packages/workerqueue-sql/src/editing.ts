import { type EnqueueInput, JOB_STATES, type Job, type Json, runAtOf } from "@switchyard/core";
import { SY } from "./columns.js";
import { markParentsNow, releaseIfReady } from "./dependencies.js";
import { encodeData } from "./encoding.js";
import { normalize } from "./enqueue.js";
import { findRow } from "./lookup.js";
import type { Store } from "./options.js";
import { enqueueRow, rowToJob } from "./row.js";
import { transition } from "./transitions.js";

/** Editing applies to a job in any state, as qless's `priority`, `tag` and re-`put` do. */
const ANY_STATE = { states: [...JOB_STATES], onWrongState: "invalid-state" as const };

export function setPriority(store: Store, queue: string, id: string, priority: number): Promise<Job> {
  return transition(store, queue, id, "change the priority of", ANY_STATE, () => ({ [SY.priority]: priority }));
}

export function setTags(store: Store, queue: string, id: string, tags: string[]): Promise<Job> {
  return transition(store, queue, id, "tag", ANY_STATE, () => ({ [SY.tags]: tags.length > 0 ? JSON.stringify(tags) : null }));
}

/** The data a qless worker sends with complete, heartbeat or fail, in the store's format; nothing else changes. */
export function setData(store: Store, queue: string, id: string, data: Json): Promise<Job> {
  return transition(store, queue, id, "set the data of", ANY_STATE, () => ({ data: encodeData(data, store.dataFormat) }));
}

/**
 * The row written as a new job's would be, in place: same row id, job id and creation time. With
 * dependencies, blocked while one of them has not completed (see markParentsNow).
 */
export async function replaceJob(store: Store, queue: string, id: string, input: EnqueueInput): Promise<Job> {
  const normalized = normalize(input);
  const blocked = normalized.dependsOn.length > 0 && (await markParentsNow(store, queue, normalized.dependsOn));
  const job = await transition(store, queue, id, "re-put", ANY_STATE, (_row, now) => {
    const {
      created_at: _created,
      [SY.jobId]: _id,
      [SY.createdMs]: _createdMs,
      ...fresh
    } = enqueueRow(store, queue, normalized, runAtOf(normalized, now), now, blocked);
    return {
      ...fresh,
      details: null,
      duration: null,
      [SY.worker]: null,
      [SY.leaseUntil]: null,
      [SY.result]: null,
      [SY.progress]: null,
      [SY.errorGroup]: null,
      [SY.startedMs]: null,
      [SY.finishedMs]: null,
      [SY.canceledMs]: null,
    };
  });
  if (!blocked) return job;
  const row = await findRow(store, store.knex, queue, id);
  if (!row || !(await releaseIfReady(store, queue, row))) return job;
  return rowToJob(store, (await findRow(store, store.knex, queue, id)) ?? row);
}
