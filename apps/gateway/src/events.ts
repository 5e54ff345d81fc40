import type { Backend, EnqueueResult, Job } from "@switchyard/core";

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

/** One lifecycle event; `id` orders every event of this gateway process and is the SSE event id. */
export interface JobEvent {
  id: number;
  type: JobEventType;
  backend: string;
  queue: string;
  /** Absent for queue events (paused, resumed). */
  jobId?: string;
  time: number;
}

/** How many past events a reconnecting subscriber can replay with Last-Event-ID. */
export const EVENT_HISTORY = 10_000;

type Listener = (event: JobEvent) => void;

/**
 * The lifecycle of every job that goes through this gateway, whichever door it came in by: the
 * backends are observed (see `observedBackend`), subscribers (the SSE routes, the parked reservers)
 * are told at once, and the last EVENT_HISTORY events stay for replay.
 */
export class JobEvents {
  readonly #history: JobEvent[] = [];
  readonly #listeners = new Set<Listener>();
  #next = 1;

  emit(type: JobEventType, backend: string, queue: string, jobId?: string): void {
    const event: JobEvent = { id: this.#next++, type, backend, queue, ...(jobId === undefined ? {} : { jobId }), time: Date.now() };
    this.#history.push(event);
    if (this.#history.length > EVENT_HISTORY) this.#history.shift();
    for (const listener of this.#listeners) listener(event);
  }

  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The events after `lastId` still held; `complete` is false when some were dropped from the history. */
  since(lastId: number): { events: JobEvent[]; complete: boolean } {
    const events = this.#history.filter((event) => event.id > lastId);
    const oldest = this.#history[0]?.id ?? this.#next;
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
  return new Proxy(backend, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const result = await value.apply(target, args);
        if (typeof args[0] === "string")
          for (const [type, jobId] of eventsOf(String(property), args, result)) events.emit(type, name, args[0], jobId);
        return result;
      };
    },
  });
}
