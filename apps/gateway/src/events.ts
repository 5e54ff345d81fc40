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
/**
 * How long what a subscriber needed is still read after it left: a stream that reconnects within it
 * replays from this process's memory, which then holds every move (an EventSource retries within
 * seconds), and a worker that parks again and again does not make the feeds widen each time.
 */
const NEED_LINGER_MS = 60_000;

/** Told each event, and where its backend's store history stood then (null when it keeps none). */
type Listener = (event: JobEvent, position: string | null) => void;
type Source = "gateway" | "store";

/** A backend whose store tells its moves, and where its feed stands. */
interface Followed {
  feed: JobEventFeed;
  watch: EventWatch;
  /** The position of the newest store event read (or the feed's position at the start). */
  position: string | null;
  /** The moves its feed tells now (null: every move), so only those are awaited from it (`#isEcho`). */
  tells: ReadonlySet<JobEventType> | null;
}

/** The same types, or both null (every type). */
const sameTypes = (a: ReadonlySet<JobEventType> | null, b: ReadonlySet<JobEventType> | null) =>
  a === null || b === null ? a === b : a.size === b.size && [...a].every((type) => b.has(type));

/**
 * The lifecycle of the jobs on every backend, for the SSE routes and the parked reservers. Two
 * sources tell it: the calls that go through this gateway (`observedBackend`), at once and every
 * move, and each store's own feed where it has one (`follow`), which also tells what other gateways
 * and the systems' own workers do. A move told by both is told to subscribers once. The last
 * EVENT_HISTORY events stay in memory for replay; a store that keeps history replays the rest. The
 * feeds are asked for the moves the subscribers need only (the dashboard's counts need completions and
 * failures, a parked reserver enqueues), so a gateway that nobody watches does not read back every job
 * it enqueues; while they read only some, a replay is read from the stores' histories.
 */
export class JobEvents {
  /** Names this process in event ids, so an id from another gateway is known for what it is. */
  readonly instance = randomBytes(4).toString("hex");
  readonly #history: Array<{ event: JobEvent; position: string | null }> = [];
  /** Each subscriber, and the moves it needs told (null: every move). */
  readonly #listeners = new Map<Listener, ReadonlySet<JobEventType> | null>();
  /** What the subscribers need, all together (null: every move): what the stores' feeds are asked to tell. */
  #needed: ReadonlySet<JobEventType> | null = null;
  /**
   * The first event id from which the history in memory holds every move the feeds saw: a feed told
   * only some moves while no subscriber needed the others, so a replay across that time is read from
   * the stores' histories instead.
   */
  #wholeFrom = 1;
  /** What subscribers that left needed, until when (see NEED_LINGER_MS), and the timer that narrows then. */
  readonly #lingering = new Map<string, { types: ReadonlySet<JobEventType> | null; until: number }>();
  #narrowLater: NodeJS.Timeout | undefined;
  readonly #followed = new Map<string, Followed>();
  /** Moves told by one source and not yet by the other: `<source>|<move key>` to how many. */
  readonly #unmatched = new Map<string, { count: number; until: number }>();
  #nextSweep = 0;
  #next = 1;

  /** @param lingerMs see NEED_LINGER_MS (0 in tests of the narrowing itself). */
  constructor(private readonly lingerMs = NEED_LINGER_MS) {}

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
      tells: null,
    };
    this.#followed.set(backend, followed);
    // Asked for what the subscribers needed so far, then for what they need now if that changed.
    this.#askFeed(followed);
    this.#narrowFeeds();
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
    clearTimeout(this.#narrowLater);
    const watches = [...this.#followed.values()].map((followed) => followed.watch.close());
    this.#followed.clear();
    await Promise.all(watches);
  }

  /**
   * Tells `listener` of every event, until the returned function is called. `types` says which moves it
   * needs (all by default): while no subscriber needs a move, the stores' feeds may leave it unread.
   */
  subscribe(listener: Listener, types?: readonly JobEventType[]): () => void {
    this.#listeners.set(listener, types ? new Set(types) : null);
    this.#narrowFeeds();
    return () => {
      const needed = this.#listeners.get(listener);
      if (needed === undefined || !this.#listeners.delete(listener)) return;
      if (this.lingerMs > 0) {
        const key = needed === null ? "*" : [...needed].sort().join(",");
        this.#lingering.set(key, { types: needed, until: Date.now() + this.lingerMs });
        clearTimeout(this.#narrowLater);
        this.#narrowLater = setTimeout(() => this.#narrowFeeds(), this.lingerMs + 1);
        this.#narrowLater.unref();
      }
      this.#narrowFeeds();
    };
  }

  /** The events after `lastId` still held; `complete` is false when some were dropped from the history or never read. */
  since(lastId: number): { events: Array<{ event: JobEvent; position: string | null }>; complete: boolean } {
    const events = this.#history.filter(({ event }) => event.id > lastId);
    const oldest = Math.max(this.#history[0]?.event.id ?? this.#next, this.#wholeFrom);
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

  /** Asks each feed for what the subscribers need now, when that changed. */
  #narrowFeeds(): void {
    const now = Date.now();
    for (const [key, { until }] of this.#lingering) if (until <= now) this.#lingering.delete(key);
    const needs = [...this.#listeners.values(), ...[...this.#lingering.values()].map(({ types }) => types)];
    const needed = needs.includes(null) ? null : new Set(needs.flatMap((types) => [...(types ?? [])]));
    if (sameTypes(needed, this.#needed)) return;
    this.#needed = needed;
    for (const followed of this.#followed.values()) this.#askFeed(followed);
  }

  #askFeed(followed: Followed): void {
    if (!followed.watch.tellOnly) return;
    const wasWhole = this.#isWhole();
    const widened = followed.tells !== null && (this.#needed === null || [...this.#needed].some((type) => !followed.tells?.has(type)));
    followed.tells = followed.watch.tellOnly(this.#needed);
    // A widened feed tells what happens from now on: its history is taken up from now too, so that a
    // stream's ids do not point back into the moves it left unread.
    if (widened) followed.position = followed.feed.positionAt?.(Date.now()) ?? followed.position;
    // The history in memory holds every move again only from the next event on.
    if (!this.#isWhole()) this.#wholeFrom = Number.POSITIVE_INFINITY;
    else if (!wasWhole) this.#wholeFrom = this.#next;
  }

  /** Whether every feed tells every move it sees. */
  #isWhole(): boolean {
    return [...this.#followed.values()].every((followed) => followed.tells === null);
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
    for (const listener of this.#listeners.keys()) listener(event, position);
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
    // A move the store's feed does not tell now (no subscriber needs it) will not come back from it.
    const tells = this.#followed.get(backend)?.tells;
    if (source === "gateway" && tells && !tells.has(type)) return false;
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
