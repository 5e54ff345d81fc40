import type { Gateway } from "@switchyard/gateway";

/* Calling the glide-mq door in-process, as its clients would: JSON bodies, and Server-Sent Events read as text. */

export interface Reply {
  status: number;
  type: string | null;
  // biome-ignore lint/suspicious/noExplicitAny: bodies are compared field by field.
  json: any;
  text: string;
}

export function caller(gateway: () => Gateway) {
  return async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> => {
    const init: RequestInit = { method, headers: { ...headers } };
    if (body !== undefined) {
      init.body = typeof body === "string" ? body : JSON.stringify(body);
      init.headers = { ...headers, "content-type": "application/json" };
    }
    const res = await gateway().app.request(path, init);
    const text = await res.text();
    const type = res.headers.get("content-type");
    return { status: res.status, type, text, json: type?.startsWith("application/json") && text !== "" ? JSON.parse(text) : undefined };
  };
}

/** Reads a Server-Sent Events response until `until` holds of what came, then cancels it. */
export async function readEvents(response: Response, until: (text: string) => boolean, timeoutMs = 5_000): Promise<string> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const deadline = Date.now() + timeoutMs;
  // One read in flight at a time: a read that loses the race to the tick is awaited again, not dropped.
  let pending = reader.read();
  while (!until(text)) {
    if (Date.now() > deadline) throw new Error(`the event stream did not say what was awaited; it said: ${JSON.stringify(text)}`);
    const next = await Promise.race([pending, new Promise<null>((resolve) => setTimeout(() => resolve(null), 200))]);
    if (next === null) continue;
    if (next.done) break;
    text += decoder.decode(next.value);
    pending = reader.read();
  }
  await reader.cancel().catch(() => undefined);
  return text;
}
