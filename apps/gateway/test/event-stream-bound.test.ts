import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { MOST_HELD_EVENTS, streamEvents } from "../src/doors/event-stream.js";
import type { GatewayEnv } from "../src/errors.js";
import { JobEvents } from "../src/events.js";

/**
 * What a job-event stream holds for a client that does not keep up: at most MOST_HELD_EVENTS events,
 * then it drops them, ends and says why, so that a stalled client cannot hold every event from then
 * on. A client that keeps up is never cut, however many events pass.
 */
function eventStream() {
  const events = new JobEvents();
  const app = new Hono<GatewayEnv>().get("/events", (c) => streamEvents(c, events, () => true));
  return { events, open: async () => (await app.request("/events")).body!.getReader() };
}

/** Everything the stream sends until it ends: its text. */
async function readToEnd(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return text;
    text += decoder.decode(value, { stream: true });
  }
}

const eventCount = (text: string) => text.split("\n").filter((line) => line.startsWith("data:")).length;

describe("a job-event stream and a client that does not keep up", () => {
  it("past MOST_HELD_EVENTS events waiting, drops them, ends saying why, and stops listening", async () => {
    const { events, open } = eventStream();
    const reader = await open();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events.listening).toBe(1);
    // Emitted at once, before the stream gets a turn: as many as a stalled client would let pile up.
    for (let i = 0; i <= MOST_HELD_EVENTS; i++) events.emit("enqueued", "main", "q", `j${i}`);
    const text = await readToEnd(reader);
    expect(eventCount(text)).toBe(0);
    expect(text).toContain(`: more than ${MOST_HELD_EVENTS} events waited for this client; reconnect with Last-Event-ID`);
    expect(events.listening).toBe(0);
  });

  it("a client that reads as events come gets every one of more than MOST_HELD_EVENTS, and the stream stays open", async () => {
    const { events, open } = eventStream();
    const reader = await open();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const total = MOST_HELD_EVENTS + 10_000;
    const decoder = new TextDecoder();
    let received = 0;
    let text = "";
    for (let sent = 0; sent < total; ) {
      // A burst of 10,000 at once (a large bulk), then the client reads it.
      for (const end = sent + 10_000; sent < end; sent++) events.emit("enqueued", "main", "q", `j${sent}`);
      while (received < sent) {
        const { value, done } = await reader.read();
        expect(done).toBe(false);
        text += decoder.decode(value, { stream: true });
        const blocks = text.split("\n\n");
        text = blocks.pop() ?? "";
        received += blocks.filter((block) => block.includes("\ndata:")).length;
      }
    }
    expect(received).toBe(total);
    expect(events.listening).toBe(1);
    await reader.cancel();
  }, 60_000);
});
