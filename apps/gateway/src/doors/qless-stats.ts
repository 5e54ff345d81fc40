import type { Backend, Job } from "@switchyard/core";
import { luaNumberText } from "./qless-args.js";
import { keyOf, perBackend, setNewest } from "./qless-state.js";

/** One day's running statistics of one measure (qless's `ql:s:<wait|run>:<day>:<queue>` hash). */
interface Measure {
  count: number;
  mean: number;
  /** Welford's sum of squared differences: the variance is vk / (count - 1). */
  vk: number;
  /** Counts by the slots of qless's histogram (see HISTOGRAM_SLOTS). */
  histogram: number[];
}

/** One day of one queue: qless's `ql:s:stats:<day>:<queue>` counters and its two measures. */
interface Day {
  retries: number;
  failed: number;
  failures: number;
  wait: Measure;
  run: Measure;
}

/**
 * The slots qless's `stats` answers, in order: seconds 0-59, minutes 1-59, hours 1-23, days 1-6. A
 * time recorded beyond six days (or below zero) is counted but in no slot, as in qless.
 */
const HISTOGRAM_SLOTS = 60 + 59 + 23 + 6;

function slotOf(seconds: number): number | undefined {
  const value = Math.floor(seconds);
  const slot =
    value < 60
      ? value
      : value < 3600
        ? 59 + Math.floor(value / 60)
        : value < 86400
          ? 118 + Math.floor(value / 3600)
          : 141 + Math.floor(value / 86400);
  return slot >= 0 && slot < HISTOGRAM_SLOTS ? slot : undefined;
}

const emptyMeasure = (): Measure => ({ count: 0, mean: 0, vk: 0, histogram: new Array(HISTOGRAM_SLOTS).fill(0) });

/** qless's day of a time in seconds: midnight (UTC) of it, `now - now % 86400`. */
const dayOf = (seconds: number) => Math.floor(seconds / 86400) * 86400;

/** queue.lua's QlessQueue:stat: Welford's running mean and variance, then the histogram slot. */
function record(measure: Measure, value: number): void {
  measure.count += 1;
  if (measure.count === 1) {
    measure.mean = value;
    measure.vk = 0;
  } else {
    const before = measure.mean;
    measure.mean += (value - measure.mean) / measure.count;
    measure.vk += (value - measure.mean) * (value - before);
  }
  const slot = slotOf(value);
  if (slot !== undefined) measure.histogram[slot] = (measure.histogram[slot] ?? 0) + 1;
}

/** A measure as `stats` answers it; cjson writes numbers with 14 significant digits (`%.14g`). */
const shown = (measure: Measure) => ({
  count: measure.count,
  mean: Number(luaNumberText(measure.mean)),
  std: measure.count > 1 ? Number(luaNumberText(Math.sqrt(measure.vk / (measure.count - 1)))) : 0,
  histogram: [...measure.histogram],
});

/**
 * qless's queue statistics (`stats <queue> <date>`) for the queues a qless door runs on a store that
 * is not qless-redis: per queue and day, how long jobs waited before a pop and ran before their
 * completion (count, mean, standard deviation, histogram), the lost locks (`retries`), the failures and
 * the jobs still failed from them. They are recorded where qless's script records them, from what the
 * qless doors of this gateway did, in memory: a job run through another door is not counted, and the
 * figures start again with the process. A job's `time` (its last put, pop or completion, from which
 * wait and run are measured) is kept for the newest MOST_JOBS jobs; an older one is measured from the
 * store's timestamps.
 */
export class QlessStats {
  readonly #days = new WeakMap<Backend, Map<string, Day>>();
  readonly #times = new WeakMap<Backend, Map<string, number>>();

  /**
   * A put into `queue` (or a move there) at `now`, seconds. A failed job put again is taken off the
   * failed count of its failure's day, in the queue it is put into, as queue.lua's put does.
   */
  put(backend: Backend, queue: string, jid: string, now: number, before: Job | null, failedAt: number | undefined): void {
    setNewest(perBackend(this.#times, backend), keyOf(queue, jid), now, MOST_JOBS);
    if (before?.state === "failed") this.#day(backend, queue, failedAt ?? now).failed -= 1;
  }

  /** A pop of `job` at `now`: how long it waited since its last put or pop. */
  popped(backend: Backend, job: Job, now: number): void {
    record(this.#day(backend, job.queue, now).wait, now - this.#since(backend, job, job.createdAt / 1000, now));
  }

  /** A completion of `job` at `now`: how long it ran since its pop. */
  completed(backend: Backend, job: Job, now: number): void {
    const poppedAt = (job.startedAt ?? job.createdAt) / 1000;
    record(this.#day(backend, job.queue, now).run, now - this.#since(backend, job, poppedAt, now));
  }

  /** A lock that ran out and whose worker was told, at a pop. */
  lockLost(backend: Backend, queue: string, now: number): void {
    this.#day(backend, queue, now).retries += 1;
  }

  /** A job of `queue` failed for good at `now` (a fail, or a retry or lost lock with no retry left). */
  failed(backend: Backend, queue: string, now: number): void {
    const day = this.#day(backend, queue, now);
    day.failures += 1;
    day.failed += 1;
  }

  /** A failed job canceled: it no longer counts as failed on its failure's day. */
  canceledFailed(backend: Backend, queue: string, failedAt: number): void {
    this.#day(backend, queue, failedAt).failed -= 1;
  }

  /** qless's `stats` reply for `queue` on the day of `date` (seconds). */
  of(backend: Backend, queue: string, date: number) {
    const day = this.#days.get(backend)?.get(keyOf(queue, String(dayOf(date))));
    const { retries, failed, failures, wait, run } = day ?? newDay();
    return { retries, failed, failures, wait: shown(wait), run: shown(run) };
  }

  /** The job's qless `time` (seconds), read and then set to `now`; `fallback` when not known here. */
  #since(backend: Backend, job: Job, fallback: number, now: number): number {
    const times = perBackend(this.#times, backend);
    const since = times.get(keyOf(job.queue, job.id)) ?? fallback;
    setNewest(times, keyOf(job.queue, job.id), now, MOST_JOBS);
    return since;
  }

  #day(backend: Backend, queue: string, seconds: number): Day {
    const days = perBackend(this.#days, backend);
    const key = keyOf(queue, String(dayOf(seconds)));
    let day = days.get(key);
    if (!day) {
      day = newDay();
      setNewest(days, key, day, MOST_DAYS);
    }
    return day;
  }
}

const newDay = (): Day => ({ retries: 0, failed: 0, failures: 0, wait: emptyMeasure(), run: emptyMeasure() });

/** Jobs whose `time` is kept (16 bytes and a key each). */
const MOST_JOBS = 100_000;
/** Queue-days kept (about 2.5 KB each): the oldest made is dropped first. */
const MOST_DAYS = 10_000;
