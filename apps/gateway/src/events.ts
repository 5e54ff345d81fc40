import { randomBytes } from "node:crypto";
import {
  type Backend,
  type CompletedAndNext,
  type EnqueueResult,
  type EventWatch,
  type Job,
  type JobEventFeed,
  type JobEventType,
  type StoreEvent,
  hasEventFeed,
  wrapMethods,
} from "@switchyard/core";

export { JOB_EVENT_TYPES, type JobEventType } from "@switchyard/core";

/** One lifecycle event; `id` orders every event of this gateway process. */
export interface JobEvent {
  id: number;
  type: JobEventType;
  backend: string;
  queue: string;
  /** Absent for queue events (paused, resumed). */
  jobId?: string;
  time: number;
}

/** How many past events a reconnecting subscriber can replay from this process's memory. */
export const EVENT_HISTORY = 10_000;
/** How long a move told by one source waits for the other source to tell it too (see `#isEcho`). */
const ECHO_WINDOW_MS = 30_000;

/** Told each event, and where its backend's store history stood then (null when it keeps none). */
type Listener = (event: JobEvent, position: string | null) => void;
type Source = "gateway" | "store";

/** A backend whose store tells its moves, and where its feed stands. */
interface Followed {
  feed: JobEventFeed;
  watch: EventWatch;
  /** The position of the newest store event read (or the feed's position at the start). */
  position: string | null;
}

/**
 * The lifecycle of the jobs on every backend, for the SSE routes and the parked reservers. Two
 * sources tell it: the calls that go through this gateway (`observedBackend`), at once and every
 * move, and each store's own feed where it has one (`follow`), which also tells what other gateways
 * and the systems' own workers do. A move told by both is told to subscribers once. The last
 * EVENT_HISTORY events stay in memory for replay; a store that keeps history replays the rest.
 */
export class JobEvents {
  /** Names this process in event ids, so an id from another gateway is known for what it is. */
  readonly instance = randomBytes(4).toString("hex");
  readonly #history: Array<{ event: JobEvent; position: string | null }> = [];
  readonly #listeners = new Set<Listener>();
  readonly #followed = new Map<string, Followed>();
  /** Moves told by one source and not yet by the other: `<source>|<move key>` to how many. */
  readonly #unmatched = new Map<string, { count: number; until: number }>();
  #nextSweep = 0;
  #next = 1;

  /** Tells the subscribers of a move made by a call through this gateway. */
  emit(type: JobEventType, backend: string, queue: string, jobId?: string): void {
    this.#followed.get(backend)?.watch.include?.(queue);
    if (this.#isEcho("gateway", backend, type, queue, jobId)) return;
    this.#tell(type, backend, queue, jobId, Date.now());
  }

  /** Reads `backend`'s store feed from now on, until `close`. */
  follow(backend: string, store: Backend, onError: (error: Error) => void): void {
    if (!hasEventFeed(store) || this.#followed.has(backend)) return;
    const feed = store as JobEventFeed;
    const followed: Followed = {
      feed,
      position: feed.positionAt?.(Date.now()) ?? null,
      watch: feed.watchEvents((event) => this.#fromStore(backend, followed, event), { onError }),
    };
    this.#followed.set(backend, followed);
  }

  /** Makes sure the stores' feeds read `queue` (someone waits on it or watches it). */
  watchQueue(queue: string): void {
    for (const followed of this.#followed.values()) followed.watch.include?.(queue);
  }

  /** The feed of a followed backend that keeps history, for replays. */
  historyOf(backend: string): JobEventFeed | null {
    const feed = this.#followed.get(backend)?.feed;
    return feed?.eventFeed.history && feed.eventsAfter ? feed : null;
  }

  /** Where each followed backend's history stands now, for the ids of a new stream. */
  positions(): Map<string, string> {
    const positions = new Map<string, string>();
    for (const [backend, followed] of this.#followed) if (followed.position !== null) positions.set(backend, followed.position);
    return positions;
  }

  async close(): Promise<void> {
    const watches = [...this.#followed.values()].map((followed) => followed.watch.close());
    this.#followed.clear();
    await Promise.all(watches);
  }

  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The events after `lastId` still held; `complete` is false when some were dropped from the history. */
  since(lastId: number): { events: Array<{ event: JobEvent; position: string | null }>; complete: boolean } {
    const events = this.#history.filter(({ event }) => event.id > lastId);
    const oldest = this.#history[0]?.event.id ?? this.#next;
    return { events, complete: lastId >= oldest - 1 };
  }

  /** How many subscribers are listening now (a stream whose client went away stops listening). */
  get listening(): number {
    return this.#listeners.size;
  }

  /** The id of the newest event so far (0 before any). */
  get lastId(): number {
    return this.#next - 1;
  }

  #fromStore(backend: string, followed: Followed, event: StoreEvent): void {
    if (event.position !== null) followed.position = event.position;
    if (this.#isEcho("store", backend, event.type, event.queue, event.jobId)) return;
    this.#tell(event.type, backend, event.queue, event.jobId, event.time);
  }

  #tell(type: JobEventType, backend: string, queue: string, jobId: string | undefined, time: number): void {
    const event: JobEvent = { id: this.#next++, type, backend, queue, ...(jobId === undefined ? {} : { jobId }), time };
    const position = this.#followed.get(backend)?.position ?? null;
    this.#history.push({ event, position });
    if (this.#history.length > EVENT_HISTORY) this.#history.shift();
    for (const listener of this.#listeners) listener(event, position);
  }

  /**
   * True when the other source already told this move (then it is not told again); otherwise notes
   * it, for the other source's telling to be recognised. Only for backends whose store is followed.
   * A creation counts as one move whether it was seen as enqueued or delayed.
   */
  #isEcho(source: Source, backend: string, type: JobEventType, queue: string, jobId: string | undefined): boolean {
    if (!this.#followed.has(backend)) return false;
    const now = Date.now();
    if (now >= this.#nextSweep) {
      for (const [key, entry] of this.#unmatched) if (entry.until < now) this.#unmatched.delete(key);
      this.#nextSweep = now + ECHO_WINDOW_MS;
    }
    const move = `${backend}\u0000${queue}\u0000${jobId ?? ""}\u0000${type === "delayed" ? "enqueued" : type}`;
    const otherKey = `${source === "gateway" ? "store" : "gateway"}|${move}`;
    const other = this.#unmatched.get(otherKey);
    if (other && other.until >= now) {
      if (--other.count === 0) this.#unmatched.delete(otherKey);
      return true;
    }
    const ownKey = `${source}|${move}`;
    const own = this.#unmatched.get(ownKey);
    if (own) {
      own.count++;
      own.until = now + ECHO_WINDOW_MS;
    } else this.#unmatched.set(ownKey, { count: 1, until: now + ECHO_WINDOW_MS });
    return false;
  }
}

/** The events a finished call announces, from its name, its queue and what it answered. */
function eventsOf(operation: string, args: unknown[], result: unknown): Array<[JobEventType, string | undefined]> {
  const job = result as Job;
  switch (operation) {
    case "enqueue":
    case "enqueueBulk": {
      const results = (operation === "enqueue" ? [result] : result) as EnqueueResult[];
      return results.filter((r) => r.created).map((r) => [r.job.state === "delayed" ? "delayed" : "enqueued", r.job.id]);
    }
    case "replace":
      return [[job.state === "delayed" ? "delayed" : "enqueued", job.id]];
    case "reserve":
      return (result as Job[]).map((reserved) => ["active", reserved.id]);
    case "heartbeat":
      return (args[2] as { progress?: unknown } | undefined)?.progress === undefined ? [] : [["progress", job.id]];
    case "setProgress":
      return [["progress", job.id]];
    case "complete":
      return [["completed", job.id]];
    case "completeAndReserve": {
      const { completed, next } = result as CompletedAndNext;
      return [["completed", completed.id], ...next.map((reserved): [JobEventType, string] => ["active", reserved.id])];
    }
    case "fail":
      return [[job.state === "failed" ? "failed" : "retrying", job.id]];
    case "cancel":
      return [["canceled", String(args[1])]];
    case "pause":
      return [["paused", undefined]];
    case "resume":
      return [["resumed", undefined]];
    default:
      return [];
  }
}

/** The backend, announcing on `events` every job transition that goes through it. */
export function observedBackend<B extends Backend>(name: string, backend: B, events: JobEvents): B {
  return wrapMethods(backend, (operation, method, target) => async (...args: unknown[]) => {
    const result = await method.apply(target, args);
    if (typeof args[0] === "string") for (const [type, jobId] of eventsOf(operation, args, result)) events.emit(type, name, args[0], jobId);
    return result;
  });
}
