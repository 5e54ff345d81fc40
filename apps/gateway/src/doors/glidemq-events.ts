import type { Backend, GlideMqEvent, GlideMqExtras, GlideMqQueues } from "@switchyard/core";
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { GatewayEnv } from "../errors.js";
import type { JobEvent, JobEventType } from "../events.js";
import { asGlideJob } from "./glidemq-jobs.js";

/** glide-mq's name for each of the gateway's events (§2.7 of the spec). */
const GLIDE_EVENT: Record<JobEventType, string> = {
  enqueued: "added",
  delayed: "added",
  active: "active",
  progress: "progress",
  completed: "completed",
  failed: "failed",
  retrying: "retrying",
  canceled: "revoked",
  paused: "paused",
  resumed: "resumed",
};

/** A gateway event framed as glide-mq's proxy frames a stream entry: its event name, `{jobId}` as data. */
export function glideFrame(event: JobEvent) {
  return { event: GLIDE_EVENT[event.type], data: { jobId: event.jobId ?? "0" } };
}

/** How often a glide-mq events stream is read again when nothing came. */
const POLL_MS = 200;
/** A `: keepalive` comment after this long without an event. */
const KEEPALIVE_MS = 5_000;
const TERMINAL = new Set(["completed", "failed"]);

/** The fields of a stream entry as glide-mq's proxy decodes them: JSON in returnvalue and data, numbers in delay and attemptsMade. */
function decode(entry: GlideMqEvent): Record<string, unknown> {
  const decoded: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(entry.fields)) {
    if (field === "returnvalue" || field === "data") {
      try {
        decoded[field] = JSON.parse(value);
      } catch {
        decoded[field] = value;
      }
    } else if (field === "delay" || field === "attemptsMade") {
      decoded[field] = Number.isFinite(Number(value)) ? Number(value) : value;
    } else decoded[field] = value;
  }
  return decoded;
}

const STREAM_ID = /^\d{1,20}(-\d{1,20})?$/;

/** Where a reconnecting client left off: the Last-Event-ID header, else `lastId`, else only new entries. */
function resumeFrom(c: Context<GatewayEnv>): string | null {
  const given = c.req.header("last-event-id") ?? c.req.query("lastId");
  return given !== undefined && STREAM_ID.test(given) ? given : null;
}

/**
 * The entries of a glide-mq queue's own events stream, as its proxy streams them: `: connected`
 * first, then `id:`/`event:`/`data:` per entry (only those of `jobId` when given, ending once it
 * completes or fails), `: keepalive` when quiet. Every process's events are there, glide-mq's too.
 */
export function glideEventStream(c: Context<GatewayEnv>, backend: GlideMqQueues, queue: string, options: { jobId?: string }): Response {
  return streamSSE(c, async (stream) => {
    let closed = false;
    stream.onAbort(() => {
      closed = true;
    });
    await stream.write(": connected\n\n");
    let after = resumeFrom(c) ?? (await backend.lastEventId(queue));
    let quietSince = Date.now();
    while (!closed) {
      const entries = await backend.readEvents(queue, after, 100);
      for (const entry of entries) {
        after = entry.id;
        if (options.jobId !== undefined && entry.fields.jobId !== options.jobId) continue;
        // In the proxy's order (id, event, data); stream ids and event names hold no newline.
        await stream.write(`id: ${entry.id}\nevent: ${entry.event}\ndata: ${JSON.stringify(decode(entry))}\n\n`);
        if (options.jobId !== undefined && TERMINAL.has(entry.event)) return;
      }
      if (entries.length > 0) {
        quietSince = Date.now();
        continue;
      }
      if (Date.now() - quietSince >= KEEPALIVE_MS) {
        await stream.write(": keepalive\n\n");
        quietSince = Date.now();
      }
      await stream.sleep(POLL_MS);
    }
  });
}

/** How often glide-mq's proxy reads a job's output stream again. */
const OUTPUT_POLL_MS = 500;

/**
 * A job's output stream (what its processor wrote with `job.stream()`) as glide-mq's proxy streams
 * it: `id:`/`data:` per entry (the entry's fields as JSON), read every 500 ms after the Last-Event-ID
 * header or `lastId`, until the job completes or fails; at once empty when there is no such job.
 */
export function jobOutputStream(c: Context<GatewayEnv>, store: Backend & GlideMqExtras, queue: string, id: string): Response {
  return streamSSE(c, async (stream) => {
    let closed = false;
    stream.onAbort(() => {
      closed = true;
    });
    const given = c.req.header("last-event-id") || c.req.query("lastId") || null;
    // The proxy hands a malformed id to XRANGE, which refuses it: its stream ends empty.
    if (given !== null && !STREAM_ID.test(given)) return;
    let after = given;
    const sendNew = async () => {
      for (const entry of await store.jobStream(queue, id, after, 100)) {
        await stream.write(`id: ${entry.id}\ndata: ${JSON.stringify(entry.fields)}\n\n`);
        after = entry.id;
      }
    };
    while (!closed) {
      await sendNew();
      const job = await store.get(queue, id);
      if (!job) return;
      const state = asGlideJob(job).state;
      if (state === "completed" || state === "failed") return sendNew();
      await stream.sleep(OUTPUT_POLL_MS);
    }
  });
}
