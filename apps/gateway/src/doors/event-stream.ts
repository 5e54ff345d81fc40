import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { GatewayEnv } from "../errors.js";
import type { JobEvent, JobEvents } from "../events.js";

/** A comment line this often keeps proxies from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;
/** Store history is replayed in pages of this many events, up to REPLAY_LIMIT in all. */
const REPLAY_PAGE = 500;
const REPLAY_LIMIT = 100_000;

/**
 * An event id says where the stream stood: `<event>.<gateway>` (this process's event number and
 * instance) then `~<backend>=<position>` for each backend whose store keeps history. A client that
 * reconnects to the same process replays from its memory; to another process (behind a load
 * balancer, after a restart), from the stores' histories.
 */
interface StreamPoint {
  id: number;
  instance: string | null;
  positions: Map<string, string>;
}

/** An event id as `formatPoint` writes it (a bare number is an id of this process). */
export const EVENT_ID_PATTERN = /^(\d{1,15})(?:\.([0-9a-f]{8}))?((?:~[^~=]+=[^~=]*)*)$/;

function formatPoint(point: StreamPoint): string {
  const positions = [...point.positions].map(([backend, position]) => `~${encodeURIComponent(backend)}=${encodeURIComponent(position)}`);
  return `${point.id}.${point.instance}${positions.join("")}`;
}

/** Where a reconnecting client left off: the Last-Event-ID header, else the `lastId` query; null if unreadable. */
function lastSeen(c: Context<GatewayEnv>): StreamPoint | null {
  const given = c.req.header("last-event-id") ?? c.req.query("lastId");
  if (given === undefined) return null;
  const match = EVENT_ID_PATTERN.exec(given);
  if (!match) return null;
  const positions = new Map<string, string>();
  try {
    for (const pair of (match[3] ?? "").split("~").slice(1)) {
      const [backend, position] = pair.split("=") as [string, string];
      positions.set(decodeURIComponent(backend), decodeURIComponent(position));
    }
  } catch {
    return null;
  }
  return { id: Number(match[1]), instance: match[2] ?? null, positions };
}

/** How a door words the events it streams. */
export interface EventFraming {
  /** The SSE `event:` name and `data:` value of an event; by default its type and the event itself. */
  frame?: (event: JobEvent) => { event: string; data: unknown };
  /** A comment sent first (glide-mq's proxy greets with `: connected`). */
  greeting?: string;
  /** The stream ends after an event for which this is true (a job that finished). */
  endsAfter?: (event: JobEvent) => boolean;
  /** The backends the stream's events come from (all when left out): the only histories it replays. */
  backends?: readonly string[];
}

const plainFrame = (event: JobEvent) => ({ event: event.type, data: event });

/**
 * The most events a stream holds for a client that reads slower than they come, or not at all (a
 * stalled connection): one more, and what it holds is dropped and the stream ends, saying why in a
 * comment. The client's EventSource then reconnects with the last id it got and is replayed from this
 * process's memory or the stores' histories (or told `reset`). Unbounded, one stalled client kept
 * every job event from then on. Well above a burst (a bulk emits its jobs' events at once).
 */
export const MOST_HELD_EVENTS = 100_000;

/**
 * Server-Sent Events of the jobs `matches` picks: `id:` (where the stream stands), `event:` (its
 * type) and `data:` (the event as JSON) lines, a `: keepalive` comment when quiet. A client that
 * reconnects with Last-Event-ID first gets what it missed; if neither this process nor the stores
 * still hold all of it, a `reset` event says so before what is left.
 */
export function streamEvents(
  c: Context<GatewayEnv>,
  events: JobEvents,
  matches: (event: JobEvent) => boolean,
  framing: EventFraming = {},
): Response {
  const frame = framing.frame ?? plainFrame;
  const inScope = (backend: string) => framing.backends === undefined || framing.backends.includes(backend);
  const from = lastSeen(c);
  return streamSSE(c, async (stream) => {
    const pending: Array<{ event: JobEvent; position: string | null }> = [];
    let wake: (() => void) | undefined;
    let closed = false;
    let overrun = false;
    // Subscribed before the replay is read, so nothing falls between the two; ids drop the overlap.
    const unsubscribe = events.subscribe((event, position) => {
      if (overrun || !matches(event)) return;
      if (pending.length >= MOST_HELD_EVENTS) {
        overrun = true;
        pending.length = 0;
      } else pending.push({ event, position });
      wake?.();
    });
    stream.onAbort(() => {
      closed = true;
      wake?.();
    });
    const point: StreamPoint = {
      id: events.lastId,
      instance: events.instance,
      positions: new Map([...events.positions()].filter(([backend]) => inScope(backend) && events.historyOf(backend))),
    };
    let ended = false;
    const write = async (event: JobEvent, position: string | null) => {
      if (position !== null && point.positions.has(event.backend)) point.positions.set(event.backend, position);
      const { event: name, data } = frame(event);
      await stream.writeSSE({ id: formatPoint(point), event: name, data: JSON.stringify(data) });
      if (framing.endsAfter?.(event)) ended = true;
    };
    const done = () => closed || ended || overrun;

    /** What this process still holds since `from`; false when the id is another process's or too old. */
    const replayFromMemory = async (from: StreamPoint): Promise<boolean> => {
      if (from.instance !== events.instance && from.instance !== null) return false;
      const held = events.since(from.id);
      if (!held.complete) return false;
      for (const { event, position } of held.events) {
        if (done()) break;
        if (!matches(event)) continue;
        point.id = event.id;
        await write(event, position);
      }
      return true;
    };

    /** What each store history the id names holds since; false when a backend of the stream keeps none. */
    const replayFromStores = async (from: StreamPoint): Promise<boolean> => {
      let whole = (framing.backends ?? []).every((backend) => events.historyOf(backend) && from.positions.has(backend));
      for (const [backend, position] of from.positions) {
        const feed = inScope(backend) ? events.historyOf(backend) : null;
        if (!feed?.eventsAfter) {
          whole = false;
          continue;
        }
        let after = position;
        for (let read = 0; read < REPLAY_LIMIT && !done(); ) {
          const page = await feed.eventsAfter(after, REPLAY_PAGE);
          for (const { position: storedAt, ...move } of page) {
            const event: JobEvent = { id: point.id, backend, ...move };
            after = storedAt ?? after;
            if (matches(event)) await write(event, storedAt);
          }
          read += page.length;
          if (page.length < REPLAY_PAGE) break;
        }
      }
      return whole;
    };

    try {
      if (framing.greeting) await stream.write(`: ${framing.greeting}\n\n`);
      if (from && !(await replayFromMemory(from)) && !(await replayFromStores(from)))
        await stream.writeSSE({ event: "reset", data: JSON.stringify({ reason: "older events are no longer held" }) });
      const sentUpTo = point.id;
      while (!done()) {
        if (pending.length === 0) {
          const woken = await new Promise<boolean>((resolve) => {
            wake = () => resolve(true);
            setTimeout(() => resolve(false), KEEPALIVE_MS);
          });
          wake = undefined;
          if (!woken && !closed) await stream.write(": keepalive\n\n");
          continue;
        }
        const { event, position } = pending.shift() as { event: JobEvent; position: string | null };
        if (event.id <= sentUpTo) continue;
        point.id = event.id;
        await write(event, position);
      }
      if (overrun) await stream.write(`: more than ${MOST_HELD_EVENTS} events waited for this client; reconnect with Last-Event-ID\n\n`);
    } finally {
      unsubscribe();
    }
  });
}
