/** Reading Server-Sent Events in tests. */

export interface SseEvent {
  id?: string;
  event?: string;
  data: { id: number; type: string; queue: string; jobId?: string; backend: string; time: number } | Record<string, string>;
}

/** A subscriber reading the SSE wire format line by line, as a browser's EventSource does. */
export function readEvents(
  app: { request(path: string, init?: RequestInit): Response | Promise<Response> },
  path: string,
  headers: Record<string, string> = {},
) {
  const received: SseEvent[] = [];
  let raw = "";
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  const response = Promise.resolve(app.request(path, { headers }));
  const reading = response.then(async (res) => {
    reader = res.body!.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        raw += decoder.decode(value, { stream: true });
        let end = raw.indexOf("\n\n");
        while (end >= 0) {
          const block = raw.slice(0, end);
          raw = raw.slice(end + 2);
          const fields = Object.fromEntries(
            block
              .split("\n")
              .filter((line) => !line.startsWith(":"))
              .map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1).trimStart()]),
          );
          if (fields.data !== undefined) received.push({ id: fields.id, event: fields.event, data: JSON.parse(fields.data) });
          end = raw.indexOf("\n\n");
        }
      }
    } catch {
      // aborted
    }
  });
  return {
    response,
    received,
    /** Waits until `count` events have arrived. */
    async atLeast(count: number, timeoutMs = 10_000): Promise<SseEvent[]> {
      const deadline = Date.now() + timeoutMs;
      while (received.length < count) {
        if (Date.now() > deadline) throw new Error(`got ${received.length} of ${count} events: ${JSON.stringify(received)}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return received;
    },
    /** Goes away as a browser tab does: the stream is cancelled and the gateway stops writing. */
    async close() {
      await response;
      await reader?.cancel();
      await reading;
    },
  };
}
