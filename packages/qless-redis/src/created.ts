import type { SwitchyardDocument } from "./job-mapping.js";

/** One job as switchyard.enqueue-many takes it: every value a string, as qless's put reads its argv. */
export interface EnqueueRecord {
  now: string;
  jid: string;
  klass: string;
  data: string;
  delay: string;
  priority: string;
  tags: string;
  retries: string;
  depends: string;
  unique: string;
  meta: string;
  /** "1" when the caller builds the new job itself (createdDocument): the script then answers no document. */
  build: string;
}

/** Whether createdDocument can stand for the document the script would read back: no dependencies to link. */
export const canBuild = (record: Omit<EnqueueRecord, "build">) => record.depends === "[]";

/**
 * The document switchyard.enqueue-many would read back for a job it has just created from `record`
 * in `queue` (qless's put: state, an empty worker and lease, `remaining` = `retries`, one `put` history
 * entry at the whole second, the scheduled score `now + delay`; `time` is the script's), so that the
 * script need not read each new job back and encode it. Only for records `canBuild` accepts, and
 * jobs nobody tracks (the script answers the document for a tracked jid).
 */
export function createdDocument(record: EnqueueRecord, queue: string, time: string): SwitchyardDocument {
  const now = Number(record.now);
  const delayed = Number(record.delay) > 0;
  const retries = Number(record.retries);
  return {
    job: {
      jid: record.jid,
      klass: record.klass,
      state: delayed ? "scheduled" : "waiting",
      queue,
      worker: "",
      tracked: false,
      priority: Number(record.priority),
      expires: 0,
      retries,
      remaining: retries,
      data: record.data,
      tags: JSON.parse(record.tags) as string[],
      history: [{ q: queue, when: Math.floor(now), what: "put" }],
      failure: {},
      spawned_from_jid: false,
      dependents: [],
      dependencies: [],
    },
    home: queue,
    // As the script wrote it: C's `%.20f` rounds a tie to even, where toFixed rounds it up.
    time,
    meta: record.meta === "" ? false : record.meta,
    result: false,
    progress: false,
    // The score put gives a scheduled job: the same double sum as Lua's, read back exactly.
    scheduled: delayed ? String(now + Number(record.delay)) : false,
  };
}
