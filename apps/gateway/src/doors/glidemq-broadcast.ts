import { randomBytes } from "node:crypto";
import { type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Backend, GlideMqBroadcastMessage, GlideMqExtras } from "@switchyard/core";
import { ValidationError } from "@switchyard/core";
import { streamSSE } from "hono/streaming";
import type { GatewayEnv } from "../errors.js";
import { BACKEND_ERRORS, body, guarded, json } from "./declare.js";
import { toEnqueueInput } from "./glidemq-jobs.js";
import { extrasOf } from "./glidemq-native.js";
import * as S from "./glidemq-schemas.js";
import { Json } from "./native-schemas.js";

/*
 * glide-mq's broadcast: POST /broadcast/:name publishes a message (a job of queue `name`, its subject
 * as the job's name), and GET /broadcast/:name/events streams what a subscription (a consumer group
 * of that queue's stream) receives, as glide-mq's proxy streams a BroadcastWorker's messages. Every
 * client of one subscription shares one reader, as the proxy shares one worker; each filters by its
 * own `subjects`.
 */

/** How often a subscription's reader looks for new messages when none came (the store's connection is shared: no blocking read). */
const POLL_MS = 100;
const KEEPALIVE_MS = 15_000;

const PublishBody = z
  .object({
    subject: z.string({ error: "Missing required field: subject" }).min(1, "Missing required field: subject"),
    data: Json.optional(),
    opts: S.JobOptions.optional(),
  })
  .openapi("GlideBroadcastPublish");
const Published = z.union([z.object({ id: z.string(), subject: z.string() }), z.object({ skipped: z.literal(true) })]);
const BroadcastParams = z.object({ name: S.QueueParams.shape.queue });
const EventsQuery = z.object({
  subscription: z
    .string({ error: "Missing required query param: subscription" })
    .min(1, "Missing required query param: subscription")
    // Blank is refused as BroadcastWorker refuses it; the name is used as given, as it uses it.
    .refine((name) => name.trim() !== "", "BroadcastWorker requires a `subscription` name (consumer group name).")
    .max(256, "subscription must be at most 256 characters")
    .describe("The subscription (consumer group) to receive as"),
  subjects: z.string().optional().describe("Comma-separated subject patterns: `*` one token, `>` the rest (last token only)"),
});

/** glide-mq's subject patterns: dot-separated tokens, `*` matches one, `>` one or more at the end. */
function subjectMatcher(raw: string | undefined): ((subject: string) => boolean) | null {
  const patterns = (raw ?? "")
    .split(",")
    .map((pattern) => pattern.trim())
    .filter(Boolean);
  if (patterns.length === 0) return null;
  for (const pattern of patterns) {
    const tokens = pattern.split(".");
    // glide-mq would throw on every message (failing it); refused up front instead.
    if (tokens.slice(0, -1).includes(">")) throw new ValidationError("`>` wildcard must be the last token in a subject pattern");
  }
  const matches = (pattern: string, subject: string) => {
    const want = pattern.split(".");
    const got = subject.split(".");
    for (const [i, token] of want.entries()) {
      if (token === ">") return i < got.length;
      if (i >= got.length || (token !== "*" && token !== got[i])) return false;
    }
    return want.length === got.length;
  };
  return (subject) => patterns.some((pattern) => matches(pattern, subject));
}

interface Listener {
  matcher: ((subject: string) => boolean) | null;
  send(message: GlideMqBroadcastMessage): Promise<void>;
  /** Ends the client's stream (its reader stopped). */
  end(): void;
}

/** One reader per store, broadcast and subscription, running while it has listeners. */
class Subscriptions {
  private readonly readers = new Map<string, Set<Listener>>();

  join(store: GlideMqExtras, name: string, subscription: string, listener: Listener): () => void {
    const key = `${name}\u0000${subscription}`;
    let listeners = this.readers.get(key);
    const starting = !listeners;
    listeners ??= new Set();
    this.readers.set(key, listeners);
    // Listening before the reader starts: it runs while it has listeners.
    listeners.add(listener);
    if (starting) void this.read(store, name, subscription, listeners, key);
    const joined = listeners;
    return () => {
      joined.delete(listener);
    };
  }

  private async read(store: GlideMqExtras, name: string, subscription: string, listeners: Set<Listener>, key: string) {
    // A consumer name like a glide-mq worker's: worker-<time>-<random>.
    const consumer = `worker-${Date.now()}-${randomBytes(4).toString("hex")}`;
    try {
      while (listeners.size > 0) {
        const messages = await store.receiveBroadcast(name, subscription, consumer, 100);
        for (const message of messages) {
          for (const listener of listeners) {
            if (!listener.matcher || listener.matcher(message.subject))
              await listener.send(message).catch(() => listeners.delete(listener));
          }
        }
        if (messages.length === 0) await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    } catch {
      // The store failed: the streams end and their clients reconnect; messages not yet read wait in the group.
      for (const listener of listeners) listener.end();
      listeners.clear();
    } finally {
      this.readers.delete(key);
    }
  }
}

export function mountBroadcastRoutes(door: OpenAPIHono<GatewayEnv>, on: (queue: string) => Backend): void {
  const subscriptions = new Subscriptions();
  const publish = body(PublishBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/broadcast/{name}",
      summary: "Publish a message to every subscription of a broadcast; 200 {skipped} when its jobId or deduplication id exists",
      middleware: publish.middleware,
      request: { params: BroadcastParams, body: publish.body },
      responses: { 201: json("Published", Published), 200: json("Skipped", Published), ...S.glideErrors(...BACKEND_ERRORS, 413) },
    }),
    async (c) => {
      const { name } = c.req.valid("param");
      const { subject, data, opts } = c.req.valid("json");
      const store = extrasOf(on(name), name, "broadcast");
      const { job, created } = await store.enqueue(name, toEnqueueInput({ name: subject, data, ...(opts ? { opts } : {}) }));
      return created ? c.json({ id: job.id, subject }, 201) : c.json({ skipped: true as const }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/broadcast/{name}/events",
      summary: "A subscription's messages as Server-Sent Events (`event: message`), those matching `subjects` only",
      request: { params: BroadcastParams, query: EventsQuery },
      responses: {
        200: { description: "Server-Sent Events", content: { "text/event-stream": { schema: S.EventText } } },
        ...S.glideErrors(...BACKEND_ERRORS),
      },
    }),
    async (c) => {
      const { name } = c.req.valid("param");
      const { subscription, subjects } = c.req.valid("query");
      const matcher = subjectMatcher(subjects);
      const store = extrasOf(on(name), name, "broadcast");
      // The group exists before the stream starts: what is published from now on reaches this client.
      await store.subscribe(name, subscription);
      return streamSSE(c, async (stream) => {
        let end = () => {};
        const ended = new Promise<void>((resolve) => {
          end = resolve;
          stream.onAbort(resolve);
        });
        await stream.write(": connected\n\n");
        const leave = subscriptions.join(store, name, subscription, {
          matcher,
          end,
          // In the proxy's order (id, event, data) and key order (data, id, subject, timestamp).
          send: async (m) => {
            await stream.write(
              `id: ${m.id}\nevent: message\ndata: ${JSON.stringify({ data: m.data, id: m.id, subject: m.subject, timestamp: m.timestamp })}\n\n`,
            );
          },
        });
        const keepalive = setInterval(() => void stream.write(": keepalive\n\n").catch(() => undefined), KEEPALIVE_MS);
        await ended;
        clearInterval(keepalive);
        leave();
      }) as never;
    },
  );
}
