import { createRequire } from "node:module";

/** redis-parser 3 (the RESP parser of node-redis and ioredis) ships no types: the part used here. */
interface RedisParser {
  execute(buffer: Buffer): void;
}
const RedisParser = createRequire(import.meta.url)("redis-parser") as new (options: {
  returnReply(reply: unknown): void;
  returnError(error: Error): void;
  returnFatalError(error: Error): void;
}) => RedisParser;

/**
 * The wire side of the RESP door: requests read with redis-parser (the parser of node-redis and
 * ioredis), replies written in RESP2 or, after `HELLO 3`, RESP3.
 */

/** A reply before encoding; `RespError` is an error reply, `RespMap` a map (RESP3) or flat list (RESP2). */
export type RespValue = string | number | bigint | null | boolean | RespError | RespMap | RespPush | RespStatus | RespValue[];

export class RespError {
  /** `message` starts with the error's kind, as Redis words it: `ERR ...`, `NOSCRIPT ...`, `NOAUTH ...`. */
  constructor(readonly message: string) {}
}

/** A simple string (`+OK`), as opposed to a bulk string. */
export class RespStatus {
  constructor(readonly text: string) {}
}

export class RespMap {
  constructor(readonly entries: Array<[string, RespValue]>) {}
}

/** Out-of-band data (pub/sub messages): a push in RESP3, a plain array in RESP2. */
export class RespPush {
  constructor(readonly items: RespValue[]) {}
}

export const OK = new RespStatus("OK");

const CRLF = "\r\n";

/** Encodes `value` in RESP2 (`protocol` 2) or RESP3. Lua's false is a null, its true an integer 1, as Redis converts them. */
export function encode(value: RespValue, protocol: 2 | 3): string {
  if (value === null || value === false) return protocol === 3 ? `_${CRLF}` : `$-1${CRLF}`;
  if (value === true) return `:1${CRLF}`;
  if (typeof value === "string") return `$${Buffer.byteLength(value)}${CRLF}${value}${CRLF}`;
  if (typeof value === "bigint") return `:${value}${CRLF}`;
  // Redis turns a Lua number into an integer reply by dropping the fraction.
  if (typeof value === "number") return `:${Math.trunc(value)}${CRLF}`;
  if (value instanceof RespStatus) return `+${value.text}${CRLF}`;
  if (value instanceof RespError) return `-${value.message.replace(/[\r\n]+/g, " ")}${CRLF}`;
  if (value instanceof RespMap) {
    const body = value.entries.map(([key, item]) => encode(key, protocol) + encode(item, protocol)).join("");
    return protocol === 3 ? `%${value.entries.length}${CRLF}${body}` : `*${value.entries.length * 2}${CRLF}${body}`;
  }
  if (value instanceof RespPush)
    return `${protocol === 3 ? ">" : "*"}${value.items.length}${CRLF}${value.items.map((item) => encode(item, protocol)).join("")}`;
  return `*${value.length}${CRLF}${value.map((item) => encode(item, protocol)).join("")}`;
}

/** What a client may send in one request before its whole frame has arrived (Redis allows 512 MB per bulk). */
export const MAX_REQUEST_BYTES = 64 * 1024 * 1024;

/**
 * Reads requests (arrays of bulk strings) from a connection's bytes. A frame that is not a request, or
 * one that grows past MAX_REQUEST_BYTES before it is whole, is a protocol error: the caller answers
 * it and closes the connection, as Redis does.
 */
export class RequestReader {
  readonly #parser: RedisParser;
  #pendingBytes = 0;
  #failed = false;

  constructor(
    onRequest: (args: string[]) => void,
    private readonly onProtocolError: (message: string) => void,
  ) {
    this.#parser = new RedisParser({
      returnReply: (reply) => {
        this.#pendingBytes = 0;
        if (this.#failed) return;
        if (Array.isArray(reply) && reply.length > 0 && reply.every((arg) => typeof arg === "string")) onRequest(reply as string[]);
        else this.#fail("Protocol error: a request is an array of bulk strings");
      },
      // A client's `-...` frame: not a request.
      returnError: () => this.#fail("Protocol error: a request is an array of bulk strings"),
      returnFatalError: (error) => this.#fail(`Protocol error: ${error.message}`),
    });
  }

  push(chunk: Buffer): void {
    if (this.#failed) return;
    this.#pendingBytes += chunk.length;
    if (this.#pendingBytes > MAX_REQUEST_BYTES) this.#fail(`Protocol error: a request over ${MAX_REQUEST_BYTES} bytes`);
    else this.#parser.execute(chunk);
  }

  #fail(message: string): void {
    if (this.#failed) return;
    this.#failed = true;
    this.onProtocolError(message);
  }
}
