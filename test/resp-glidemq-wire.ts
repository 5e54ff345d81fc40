import { type Socket, connect } from "node:net";

/**
 * RESP replies as plain JSON, for recording what Redis answered a glide-mq client and replaying it
 * through the RESP door. valkey-glide speaks RESP3 (HELLO 3), which redis-parser does not read, so
 * this reads the few RESP3 types Redis sends: maps, sets, nulls, booleans, doubles and pushes.
 */

/** A reply as JSON: `{err}` for an error reply, `{map}` for a RESP3 map, `{push}` for out-of-band data. */
export type WireReply =
  | string
  | number
  | boolean
  | null
  | { err: string }
  | { status: string }
  | { map: Array<[WireReply, WireReply]> }
  | { push: WireReply[] }
  | WireReply[];

/** A request as a client sends it: an array of bulk strings. */
export function encodeRequest(args: string[]): Buffer {
  const parts = [`*${args.length}\r\n`];
  for (const arg of args) parts.push(`$${Buffer.byteLength(arg)}\r\n${arg}\r\n`);
  return Buffer.from(parts.join(""));
}

/** Reads whole frames from a byte stream: requests (arrays of bulk strings) or replies alike. */
export class FrameReader {
  #buffer = Buffer.alloc(0);

  push(chunk: Buffer): WireReply[] {
    this.#buffer = Buffer.concat([this.#buffer, chunk]);
    const frames: WireReply[] = [];
    for (;;) {
      const parsed = parseFrame(this.#buffer, 0);
      if (!parsed) return frames;
      frames.push(parsed.value);
      this.#buffer = this.#buffer.subarray(parsed.end);
    }
  }
}

function parseFrame(buffer: Buffer, start: number): { value: WireReply; end: number } | undefined {
  const lineEnd = buffer.indexOf("\r\n", start);
  if (lineEnd < 0) return undefined;
  const type = String.fromCharCode(buffer[start] as number);
  const line = buffer.toString("utf8", start + 1, lineEnd);
  const next = lineEnd + 2;
  switch (type) {
    case "+":
      return { value: { status: line }, end: next };
    case "-":
      return { value: { err: line }, end: next };
    case ":":
      return { value: Number(line), end: next };
    case ",":
      return { value: Number(line), end: next };
    case "_":
      return { value: null, end: next };
    case "#":
      return { value: line === "t", end: next };
    case "$":
    case "=":
    case "!": {
      const length = Number(line);
      if (length < 0) return { value: null, end: next };
      if (buffer.length < next + length + 2) return undefined;
      const text = buffer.toString("utf8", next, next + length);
      return { value: type === "!" ? { err: text } : text, end: next + length + 2 };
    }
    case "*":
    case "~":
    case ">":
    case "%": {
      const count = Number(line);
      if (count < 0) return { value: null, end: next };
      const items: WireReply[] = [];
      let at = next;
      for (let i = 0; i < (type === "%" ? count * 2 : count); i++) {
        const item = parseFrame(buffer, at);
        if (!item) return undefined;
        items.push(item.value);
        at = item.end;
      }
      if (type === "%") {
        const map: Array<[WireReply, WireReply]> = [];
        for (let i = 0; i < items.length; i += 2) map.push([items[i] as WireReply, items[i + 1] as WireReply]);
        return { value: { map }, end: at };
      }
      return { value: type === ">" ? { push: items } : items, end: at };
    }
    default:
      throw new Error(`not a RESP frame: ${JSON.stringify(buffer.toString("utf8", start, Math.min(buffer.length, start + 40)))}`);
  }
}

/** A bare RESP connection: one request at a time, its reply as JSON (out-of-band pushes set aside). */
export class WireClient {
  readonly #reader = new FrameReader();
  readonly #waiting: Array<(reply: WireReply) => void> = [];

  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      for (const frame of this.#reader.push(chunk)) {
        if (frame !== null && typeof frame === "object" && !Array.isArray(frame) && "push" in frame) continue;
        this.#waiting.shift()?.(frame);
      }
    });
  }

  static async connect(port: number): Promise<WireClient> {
    const socket = connect(port, "127.0.0.1");
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    return new WireClient(socket);
  }

  send(args: string[]): Promise<WireReply> {
    return new Promise((resolve) => {
      this.#waiting.push(resolve);
      this.socket.write(encodeRequest(args));
    });
  }

  /** Every command in one write (a pipeline as one TCP segment); their replies in order. */
  sendAll(commands: string[][]): Promise<WireReply[]> {
    const replies = commands.map((_command) => new Promise<WireReply>((resolve) => this.#waiting.push(resolve)));
    this.socket.write(Buffer.concat(commands.map(encodeRequest)));
    return Promise.all(replies);
  }

  close(): void {
    this.socket.destroy();
  }
}

/**
 * `FCALL glidemq_addJob` as glide-mq 0.15.4's Queue.add sends it (see the add fixture): four keys,
 * then name, data, opts, timestamp, delay, priority, parentId, maxAttempts, and the options glide-mq
 * sends empty or 0 when unused (ordering, group limits, token bucket, cost, ttl, jobId, lifo, ...).
 */
export function addJobCommand(queue: string, name: string, data: unknown, opts: Record<string, unknown> = {}): string[] {
  const key = (suffix: string) => `glide:{${queue}}:${suffix}`;
  const numbers = (count: number) => Array<string>(count).fill("0");
  return [
    ...["FCALL", "glidemq_addJob", "4", key("id"), key("stream"), key("scheduled"), key("events")],
    ...[name, JSON.stringify(data), JSON.stringify(opts), String(Date.now())],
    ...[String(opts.delay ?? 0), String(opts.priority ?? 0), "", String(opts.attempts ?? 0), "", ...numbers(7)],
    ...[String(opts.jobId ?? ""), "0", "", "", "0"],
  ];
}
