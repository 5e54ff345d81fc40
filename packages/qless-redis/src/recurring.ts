import type { Recurrence } from "@switchyard/core";

/**
 * Core's Recurrence onto qless's own recurring job (`ql:r:<jid>` and its queue's `-recur` set, as
 * `recur` writes them; 90/91-switchyard-*.lua), both ways. qless keeps seconds and the data as its
 * client spelled it: the spelling travels in `native.qless.data`, and an interval or next run that
 * milliseconds would not give back exactly in `native.qless.interval` and `native.qless.next` (the
 * latter used only while the next run is still that one), so a trip through another store and back
 * writes the same hash and score.
 */

/** ql:r:<jid>'s fields in the order switchyard.recurrence reads them, then the score. */
export type RecurrenceFields = [
  jid: string,
  klass: string,
  queue: string,
  priority: string,
  interval: string,
  retries: string,
  count: string,
  data: string,
  tags: string,
  backlog: string | false,
  score: string | false,
];

/** Seconds as epoch ms, to the microsecond: a double of seconds near 2^31 holds no finer digits. */
const toMs = (seconds: number) => Math.round(seconds * 1e6) / 1e3;

export function fromRecurrenceFields(fields: RecurrenceFields): Recurrence {
  const [jid, klass, queue, priority, interval, retries, count, dataText, tagsText, backlog, score] = fields;
  const data = JSON.parse(dataText);
  const seconds = Number(interval);
  const qless: Record<string, unknown> = {};
  if (JSON.stringify(data) !== dataText) qless.data = dataText;
  if (toMs(seconds) / 1000 !== seconds) qless.interval = seconds;
  if (score !== false && toMs(Number(score)) / 1000 !== Number(score)) qless.next = score;
  const tags = JSON.parse(tagsText) as string[] | Record<string, never>;
  return {
    id: jid,
    queue,
    name: klass,
    data,
    priority: Number(priority),
    tags: Array.isArray(tags) ? tags : [],
    maxAttempts: Number(retries) + 1,
    intervalMs: toMs(seconds),
    nextAt: score === false ? 0 : toMs(Number(score)),
    count: Number(count),
    backlog: Number(backlog || 0),
    native: Object.keys(qless).length > 0 ? { qless } : {},
  };
}

/** switchyard.put-recurrence's arguments after `now`. */
export function recurrenceArgs(recurrence: Recurrence): string[] {
  const kept = (recurrence.native.qless ?? {}) as { data?: unknown; interval?: unknown; next?: unknown };
  const dataText = typeof kept.data === "string" ? kept.data : JSON.stringify(recurrence.data);
  const interval = typeof kept.interval === "number" ? kept.interval : recurrence.intervalMs / 1000;
  const sameNext = typeof kept.next === "string" && toMs(Number(kept.next)) === recurrence.nextAt;
  return [
    recurrence.id,
    recurrence.queue,
    recurrence.name,
    dataText,
    String(recurrence.priority),
    JSON.stringify(recurrence.tags),
    String(recurrence.maxAttempts - 1),
    String(interval),
    sameNext ? (kept.next as string) : String(recurrence.nextAt / 1000),
    String(recurrence.count),
    String(recurrence.backlog),
  ];
}
