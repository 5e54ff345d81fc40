import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { GatewayEnv } from "../errors.js";
import type { JobEvent, JobEvents } from "../events.js";

/** A comment line this often keeps proxies from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;

/** Where a reconnecting client left off: the Last-Event-ID header, else the `lastId` query. */
function lastSeen(c: Context<GatewayEnv>): number | null {
  const given = c.req.header("last-event-id") ?? c.req.query("lastId");
  return given !== undefined && /^\d{1,15}$/.test(given) ? Number(given) : null;
}

/** How a door words the events it streams. */
export interface EventFraming {
  /** The SSE `event:` name and `data:` value of an event; by default its type and the event itself. */
  frame?: (event: JobEvent) => { event: string; data: unknown };
  /** A comment sent first (glide-mq's proxy greets with `: connected`). */
  greeting?: string;
  /** The stream ends after an event for which this is true (a job that finished). */
  endsAfter?: (event: JobEvent) => boolean;
}

const plainFrame = (event: JobEvent) => ({ event: event.type, data: event });

/**
 * Server-Sent Events of the jobs `matches` picks: `id:` (the event id), `event:` (its type) and
 * `data:` (the event as JSON) lines, a `: keepalive` comment when quiet. A client that reconnects
 * with Last-Event-ID first gets what it missed; if the history no longer holds all of it, a `reset`
 * event says so before what is left.
 */
export function streamEvents(
  c: Context<GatewayEnv>,
  events: JobEvents,
  matches: (event: JobEvent) => boolean,
  framing: EventFraming = {},
): Response {
  const frame = framing.frame ?? plainFrame;
  return streamSSE(c, async (stream) => {
    const pending: JobEvent[] = [];
    let wake: (() => void) | undefined;
    let closed = false;
    // Subscribed before the replay is read, so nothing falls between the two; ids drop the overlap.
    const unsubscribe = events.subscribe((event) => {
      if (!matches(event)) return;
      pending.push(event);
      wake?.();
    });
    stream.onAbort(() => {
      closed = true;
      wake?.();
    });
    let ended = false;
    const write = async (event: JobEvent) => {
      const { event: name, data } = frame(event);
      await stream.writeSSE({ id: String(event.id), event: name, data: JSON.stringify(data) });
      if (framing.endsAfter?.(event)) ended = true;
    };
    try {
      if (framing.greeting) await stream.write(`: ${framing.greeting}\n\n`);
      let sent = lastSeen(c) ?? events.lastId;
      const from = lastSeen(c);
      if (from !== null) {
        const replay = events.since(from);
        if (!replay.complete)
          await stream.writeSSE({ event: "reset", data: JSON.stringify({ reason: "older events are no longer held" }) });
        for (const event of replay.events.filter(matches)) {
          if (ended) break;
          await write(event);
          sent = event.id;
        }
      }
      while (!closed && !ended) {
        if (pending.length === 0) {
          const woken = await new Promise<boolean>((resolve) => {
            wake = () => resolve(true);
            setTimeout(() => resolve(false), KEEPALIVE_MS);
          });
          wake = undefined;
          if (!woken && !closed) await stream.write(": keepalive\n\n");
          continue;
        }
        const event = pending.shift()!;
        if (event.id <= sent) continue;
        await write(event);
        sent = event.id;
      }
    } finally {
      unsubscribe();
    }
  });
}
