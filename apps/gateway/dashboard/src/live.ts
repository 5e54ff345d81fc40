import { useEffect, useRef } from "preact/hooks";
import { authHeaders } from "./api.js";
import type { JobEvent } from "./types.js";

/*
 * The gateway's event stream (GET /v1/events), read with fetch rather than EventSource so the
 * bearer token goes along. A dropped stream reconnects with Last-Event-ID (the id is opaque: only
 * handed back), waiting longer after each failure, up to MAX_BACKOFF_MS.
 */

export type LiveStatus = "connecting" | "live" | "reconnecting" | "off";

const MAX_BACKOFF_MS = 15_000;
const listeners = new Set<(event: JobEvent) => void>();

/** One parsed SSE message: its fields, once the blank line that ends it has come. */
interface Message {
  id?: string;
  event?: string;
  data: string[];
}

/** Splits the stream into messages; the caller feeds it text as it arrives. */
export function sseParser(onMessage: (message: Message) => void): (chunk: string) => void {
  let buffer = "";
  let message: Message = { data: [] };
  return (chunk) => {
    buffer += chunk;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "") {
        if (message.data.length > 0 || message.event) onMessage(message);
        message = { data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "data") message.data.push(value);
      else if (field === "id") message.id = value;
      else if (field === "event") message.event = value;
    }
  };
}

/** Follows the stream until `signal` aborts; tells every subscriber each event, and `onStatus` how it goes. */
export async function followEvents(signal: AbortSignal, onStatus: (status: LiveStatus) => void): Promise<void> {
  let lastId: string | undefined;
  let failures = 0;
  while (!signal.aborted) {
    onStatus(failures === 0 ? "connecting" : "reconnecting");
    try {
      const headers: Record<string, string> = { Accept: "text/event-stream", ...authHeaders() };
      if (lastId !== undefined) headers["Last-Event-ID"] = lastId;
      const response = await fetch("/v1/events", { headers, signal, cache: "no-store" });
      // A token that may not read events will not gain it by retrying.
      if (response.status === 401 || response.status === 403) return onStatus("off");
      if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
      onStatus("live");
      failures = 0;
      const parse = sseParser((message) => {
        if (message.id !== undefined) lastId = message.id;
        if (message.event === "reset" || message.data.length === 0) return;
        try {
          const event = JSON.parse(message.data.join("\n")) as JobEvent;
          for (const listener of listeners) listener(event);
        } catch {
          // Not an event of ours (a comment-like payload): nothing to tell.
        }
      });
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parse(value);
      }
    } catch {
      if (signal.aborted) return;
    }
    failures++;
    onStatus("reconnecting");
    await new Promise((resolve) => setTimeout(resolve, Math.min(MAX_BACKOFF_MS, 500 * 2 ** failures)));
  }
}

/** Calls `onEvent` for every event `matches` picks while the component is mounted. */
export function useJobEvents(matches: (event: JobEvent) => boolean, onEvent: (event: JobEvent) => void): void {
  const latest = useRef({ matches, onEvent });
  latest.current = { matches, onEvent };
  useEffect(() => {
    const listener = (event: JobEvent) => {
      if (latest.current.matches(event)) latest.current.onEvent(event);
    };
    listeners.add(listener);
    return () => listeners.delete(listener);
  }, []);
}

/**
 * A loader run at once, again after events (at most once per `settleMs`, so a burst of events
 * makes one request), and every `everyMs` besides: the stream only carries what went through this
 * gateway process, and workers elsewhere move jobs too. A loader that answers a promise is not run
 * again until it settles (then once more if it was due meanwhile): a store slow to answer, such as
 * a SQL store counting a queue of a million jobs, is not asked again and again over its own reads.
 */
export function useRefresh(load: () => unknown, deps: unknown[], { settleMs = 400, everyMs = 15_000 } = {}) {
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const loadRef = useRef(load);
  loadRef.current = load;
  const runs = useRef({ running: false, due: false });
  const run = () => {
    if (runs.current.running) {
      runs.current.due = true;
      return;
    }
    runs.current.running = true;
    const settled = () => {
      runs.current.running = false;
      if (!runs.current.due) return;
      runs.current.due = false;
      run();
    };
    Promise.resolve(loadRef.current()).then(settled, settled);
  };
  // biome-ignore lint/correctness/useExhaustiveDependencies: the caller names what the loader depends on.
  useEffect(() => {
    run();
    const poll = setInterval(run, everyMs);
    return () => {
      clearInterval(poll);
      if (timer.current) clearTimeout(timer.current);
      timer.current = null;
    };
  }, deps);
  return () => {
    if (timer.current) return;
    timer.current = setTimeout(() => {
      timer.current = null;
      run();
    }, settleMs);
  };
}
