import { type JobEventFeed, type StoreEvent, ToldMoves, eventTypeOfState, watchInRounds } from "@switchyard/core";
import type { Filter } from "mongodb";
import type { CloudqDocument } from "./document.js";
import { documentToJob } from "./document.js";
import type { Store } from "./store.js";

/**
 * Job events read from `cloudq.jobs` by change time, every POLL_MS: documents inserted
 * (`inserted_at`) or changed (`updated_at`, which every Switchyard transition and node-cloudq's
 * reserve set) since the last look. FerretDB has no change streams, so this is the one way that
 * works on every server the adapter supports. A look sees a document's latest state only; a job
 * completed in the `remove` layout is deleted, so its completion is not seen; nothing is kept to
 * replay.
 */
const POLL_MS = 500;
/** Each look reads again this far back: a write may land after a later-dated one. */
const OVERLAP_MS = 2_000;
const PAGE = 500;

export function cloudqEventFeed(store: Store, ready: () => Promise<void>): JobEventFeed {
  return {
    eventFeed: {
      mechanism: `the documents inserted or updated since the last look (inserted_at, updated_at), every ${POLL_MS} ms`,
      history: false,
      everyMove: false,
      latencyMs: POLL_MS,
    },

    watchEvents(onEvent, options = {}) {
      const start = Date.now();
      let since = start;
      /** What each document in the overlap was last told as, so one read again is not told again. */
      const told = new ToldMoves(since, OVERLAP_MS);

      const changedSince = (field: "inserted_at" | "updated_at", from: Date, after: unknown) =>
        store.jobs
          .find(
            (after === undefined
              ? { [field]: { $gte: from } }
              : { [field]: { $gte: from }, _id: { $gt: after } }) as Filter<CloudqDocument>,
          )
          .sort({ _id: 1 })
          .limit(PAGE)
          .toArray();

      const look = async () => {
        const now = Date.now();
        const from = new Date(since - OVERLAP_MS);
        for (const field of ["inserted_at", "updated_at"] as const) {
          for (let after: unknown; ; ) {
            const documents = await changedSince(field, from, after);
            for (const document of documents) {
              const time = Math.max(document.updated_at?.getTime() ?? 0, document.inserted_at?.getTime() ?? 0);
              const job = documentToJob(document, store.layout.stateField, now);
              const type = eventTypeOfState(job.state, job.attempts);
              const key = `${type}:${time}:${document.switchyard?.attempts ?? 0}`;
              const id = String(document._id);
              if (told.told(id, key)) continue;
              told.tell(id, key);
              since = Math.max(since, time);
              const event: StoreEvent = { type, queue: document.queue, jobId: job.id, time, position: null };
              // What changed before the watch began is not news.
              if (time >= start) onEvent(event);
            }
            if (documents.length < PAGE) break;
            after = documents[documents.length - 1]?._id;
          }
        }
        told.forgetBefore(since);
      };

      return watchInRounds(
        async () => {
          await ready();
          await look();
        },
        { pauseMs: POLL_MS, ...(options.onError ? { onError: options.onError } : {}) },
      );
    },
  };
}
