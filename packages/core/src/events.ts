import type { Backend } from "./backend.js";
import type { JobState } from "./job.js";

/** The moves of a job (and of a queue: paused, resumed) that event subscribers are told of. */
export const JOB_EVENT_TYPES = [
  "enqueued",
  "delayed",
  "active",
  "progress",
  "completed",
  "failed",
  "retrying",
  "canceled",
  "paused",
  "resumed",
] as const;
export type JobEventType = (typeof JOB_EVENT_TYPES)[number];

/**
 * The move that left a job in `state`, for feeds that see states rather than moves (a poll): a job
 * waiting again after an attempt is retrying; a blocked one was enqueued.
 */
export function eventTypeOfState(state: JobState, attempts: number): JobEventType {
  if (state === "waiting" || state === "blocked") return attempts > 0 ? "retrying" : "enqueued";
  if (state === "delayed") return attempts > 0 ? "retrying" : "delayed";
  return state;
}

/** A move as the store recorded it, whoever made it (a gateway, the system's own workers). */
export interface StoreEvent {
  type: JobEventType;
  queue: string;
  /** Absent for queue events (paused, resumed). */
  jobId?: string;
  /** Epoch ms, as the store dated it. */
  time: number;
  /**
   * Where the feed stands once this event is read, for `eventsAfter` to go on after it; null when
   * the store keeps no history. Opaque outside the adapter.
   */
  position: string | null;
}

/** How a store tells of its jobs' moves, for the documentation and the operators. */
export interface EventFeedInfo {
  /** The store's mechanism, in its own words (`XREAD BLOCK on glide:{q}:events`, `LISTEN/NOTIFY`...). */
  mechanism: string;
  /** True when past events can be read again from a position (`eventsAfter`). */
  history: boolean;
  /**
   * True when every move is told; false when the store tells only some (qless's `ql:log` has no
   * `popped`, glide-mq writes no `active` for stream jobs, a poll sees only a row's latest state).
   */
  everyMove: boolean;
  /** How long after a move the feed typically tells of it, in ms. */
  latencyMs: number;
}

export interface EventWatch {
  close(): Promise<void>;
  /**
   * Reads `queue` from now on if the feed did not already: for stores whose queues are found by
   * looking (glide-mq), so a queue someone waits on is not left until the next look.
   */
  include?(queue: string): void;
  /**
   * Tells only moves of these types from the next look on (null: every move), for a feed that can
   * leave the others unread at the store (a feed without it tells every move; subscribers skip what
   * they do not need). Answers the types it will tell, which may be more than asked (a poll that
   * sees states cannot tell an enqueued job from a delayed one without reading it). Moves dated
   * before a widening are not told: a subscriber that asks for more is told what happens from then.
   */
  tellOnly?(types: ReadonlySet<JobEventType> | null): ReadonlySet<JobEventType> | null;
}

export interface WatchOptions {
  /** Start after this position (from an earlier event or `positionAt`); by default from now. */
  after?: string;
  /** A failed read; the watch goes on trying after a pause. */
  onError?: (error: Error) => void;
}

/**
 * Job events read from the store itself, so moves made by other processes are seen too. A feed may
 * tell a move twice (a poll that overlaps, a replay); subscribers that need each move once compare
 * positions or job states.
 */
export interface JobEventFeed {
  readonly eventFeed: EventFeedInfo;
  /** Tells `onEvent` of every move on every queue of the store from now (or after `options.after`). */
  watchEvents(onEvent: (event: StoreEvent) => void, options?: WatchOptions): EventWatch;
  /** Up to `limit` recorded events after `position`, oldest first; only when `eventFeed.history`. */
  eventsAfter?(position: string, limit: number): Promise<StoreEvent[]>;
  /** The position just before the moves made from `time` (epoch ms) on; only when `eventFeed.history`. */
  positionAt?(time: number): string;
}

export function hasEventFeed(backend: Backend): backend is Backend & JobEventFeed {
  const feed = backend as Partial<JobEventFeed>;
  return typeof feed.watchEvents === "function" && typeof feed.eventFeed === "object";
}

/** Resolves after `ms`, or at once when `signal` aborts or the `wake` it is handed is called. */
export function pause(ms: number, signal: AbortSignal, onWake?: (wake: () => void) => void): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    onWake?.(done);
  });
}

/**
 * For a feed that reads a store's changes by change time, each look reading back `overlapMs` before
 * the newest change it told (`since`): what it told of each record (a key of its move), so that a
 * record read again in a later look's overlap is not told twice. A record is kept while `since` has
 * not moved 2 x overlapMs past it, in two generations, the older dropped whole once `since` has moved
 * that far past the newer's start: no look walks every record kept (walking them cost a PostgreSQL
 * store's feed 12,000 rows at each of 50 looks a second under 3,000 completions/s).
 */
export class ToldMoves {
  #newer = new Map<string, string>();
  #older = new Map<string, string>();
  #newerFrom: number;

  constructor(
    since: number,
    private readonly overlapMs: number,
  ) {
    this.#newerFrom = since;
  }

  /** Whether `key` is what was last told of record `id`. */
  told(id: string, key: string): boolean {
    return (this.#newer.get(id) ?? this.#older.get(id)) === key;
  }

  tell(id: string, key: string): void {
    this.#newer.set(id, key);
  }

  /** After a look: forgets what no later look can read again. */
  forgetBefore(since: number): void {
    if (since - this.#newerFrom < 2 * this.overlapMs) return;
    this.#older = this.#newer;
    this.#newer = new Map();
    this.#newerFrom = since;
  }
}

/**
 * A watch that reads in rounds (a poll, a blocking read), pausing `retryMs` after a failed round,
 * until closed. `round` resolves when it has read what there was; `signal` aborts at close.
 */
export function watchInRounds(
  round: (signal: AbortSignal) => Promise<void>,
  options: { pauseMs: number; retryMs?: number; onError?: (error: Error) => void },
): EventWatch {
  const controller = new AbortController();
  const loop = (async () => {
    while (!controller.signal.aborted) {
      try {
        await round(controller.signal);
        if (options.pauseMs > 0) await pause(options.pauseMs, controller.signal);
      } catch (error) {
        if (controller.signal.aborted) break;
        options.onError?.(error as Error);
        await pause(options.retryMs ?? 1_000, controller.signal);
      }
    }
  })();
  return {
    close: async () => {
      controller.abort();
      await loop;
    },
  };
}
