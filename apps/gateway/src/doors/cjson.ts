import type { Json } from "@switchyard/core";

/**
 * JSON read as the cjson inside Redis reads it (lua-cjson 2.1.0, which qless.lua calls for every
 * JSON argument), so that the qless doors refuse bad JSON in cjson's own words, for example
 * `Expected object key string but found invalid token at character 2`, and take what cjson takes
 * beyond strict JSON (hex, leading zeros and a leading `+` in numbers, raw control characters in
 * strings, the text ending at a NUL byte). Positions count bytes of the UTF-8 text from 1, as cjson's do.
 */

export class CjsonError extends Error {}

/** cjson takes inf and nan as numbers; JSON, and so every store but qless's own, cannot hold them. */
export class BeyondJsonError extends Error {}

/** cjson's limit on nested objects and arrays (decode_max_depth). */
const MAX_DEPTH = 1000;

type TokenName =
  | "T_OBJ_BEGIN"
  | "T_OBJ_END"
  | "T_ARR_BEGIN"
  | "T_ARR_END"
  | "T_STRING"
  | "T_NUMBER"
  | "T_BOOLEAN"
  | "T_NULL"
  | "T_COLON"
  | "T_COMMA"
  | "T_END";

type Token =
  | { type: "T_STRING"; at: number; value: string }
  | { type: "T_NUMBER"; at: number; value: number }
  | { type: "T_BOOLEAN"; at: number; value: boolean }
  | { type: Exclude<TokenName, "T_STRING" | "T_NUMBER" | "T_BOOLEAN">; at: number }
  /** A token cjson could not read: `problem` is what its message says it found. */
  | { type: "T_ERROR"; at: number; problem: string };

const SINGLE: Record<string, TokenName> = {
  "{": "T_OBJ_BEGIN",
  "}": "T_OBJ_END",
  "[": "T_ARR_BEGIN",
  "]": "T_ARR_END",
  ",": "T_COMMA",
  ":": "T_COLON",
};
const ESCAPES: Record<string, number> = { '"': 0x22, "\\": 0x5c, "/": 0x2f, b: 0x08, t: 0x09, n: 0x0a, f: 0x0c, r: 0x0d };
const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
/** What C's strtod reads as a number at the start of the text (decimal, hexadecimal, inf, nan). */
const STRTOD =
  /^[+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)/i;

/**
 * Decodes `text` as cjson does, or throws a CjsonError with cjson's message. Strict JSON within
 * cjson's depth goes through JSON.parse, which reads it to the same value faster.
 */
export function cjsonDecode(text: string): Json {
  // Surrogate escapes (cjson refuses lone ones), numbers past a double's range and deep nesting are read as cjson reads them.
  if (!/\\u[dD][89a-fA-F]|\d[eE]\+?\d{3}/.test(text) && !deeperThanCjson(text)) {
    try {
      return JSON.parse(text) as Json;
    } catch {
      // Not strict JSON: cjson may still take it, or says why not.
    }
  }
  return new CjsonReader(Buffer.from(text, "utf8")).document();
}

/** Whether the text could nest more than cjson allows (counting brackets bounds the depth from above). */
function deeperThanCjson(text: string): boolean {
  if (text.length <= MAX_DEPTH) return false;
  let brackets = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if ((code === 0x5b || code === 0x7b) && ++brackets > MAX_DEPTH) return true;
  }
  return false;
}

class CjsonReader {
  private index = 0;
  private depth = 0;
  private beyondJson: string | undefined;

  constructor(private readonly bytes: Buffer) {}

  document(): Json {
    // cjson reads only the first two bytes to tell UTF-16 and UTF-32 from UTF-8.
    if (this.bytes.length >= 2 && (this.bytes[0] === 0 || this.bytes[1] === 0)) {
      throw new CjsonError("JSON parser does not support UTF-16 or UTF-32");
    }
    const value = this.value(this.next());
    const end = this.next();
    if (end.type !== "T_END") this.fail("the end", end);
    if (this.beyondJson) throw new BeyondJsonError(this.beyondJson);
    return value;
  }

  private fail(expected: string, token: Token): never {
    const found = token.type === "T_ERROR" ? token.problem : token.type;
    throw new CjsonError(`Expected ${expected} but found ${found} at character ${token.at + 1}`);
  }

  private value(token: Token): Json {
    switch (token.type) {
      case "T_STRING":
      case "T_NUMBER":
      case "T_BOOLEAN":
        return token.value;
      case "T_NULL":
        return null;
      case "T_OBJ_BEGIN":
        return this.object();
      case "T_ARR_BEGIN":
        return this.array();
      default:
        return this.fail("value", token);
    }
  }

  private descend(): void {
    if (++this.depth > MAX_DEPTH) throw new CjsonError(`Found too many nested data structures (${this.depth}) at character ${this.index}`);
  }

  private object(): Json {
    this.descend();
    const object: Record<string, Json> = {};
    let token = this.next();
    if (token.type !== "T_OBJ_END") {
      for (;;) {
        if (token.type !== "T_STRING") this.fail("object key string", token);
        const key = token.value;
        const colon = this.next();
        if (colon.type !== "T_COLON") this.fail("colon", colon);
        // defineProperty, so a key such as `__proto__` is a plain field, as JSON.parse makes it.
        Object.defineProperty(object, key, { value: this.value(this.next()), enumerable: true, writable: true, configurable: true });
        token = this.next();
        if (token.type === "T_OBJ_END") break;
        if (token.type !== "T_COMMA") this.fail("comma or object end", token);
        token = this.next();
      }
    }
    this.depth--;
    return object;
  }

  private array(): Json {
    this.descend();
    const array: Json[] = [];
    let token = this.next();
    if (token.type !== "T_ARR_END") {
      for (;;) {
        array.push(this.value(token));
        token = this.next();
        if (token.type === "T_ARR_END") break;
        if (token.type !== "T_COMMA") this.fail("comma or array end", token);
        token = this.next();
      }
    }
    this.depth--;
    return array;
  }

  /** The byte at `at`, 0 past the end: cjson reads a NUL-terminated string, so a NUL ends the text. */
  private byte(at: number): number {
    return this.bytes[at] ?? 0;
  }

  private next(): Token {
    while (WHITESPACE.has(this.byte(this.index))) this.index++;
    const at = this.index;
    const code = this.byte(at);
    if (code === 0) return { type: "T_END", at };
    const char = String.fromCharCode(code);
    const single = SINGLE[char];
    if (single) {
      this.index++;
      return { type: single, at } as Token;
    }
    if (char === '"') return this.string();
    const rest = this.bytes.subarray(at, at + 9).toString("latin1");
    if (char === "-" || (char >= "0" && char <= "9")) return this.number();
    for (const [word, token] of [
      ["true", { type: "T_BOOLEAN", at, value: true }],
      ["false", { type: "T_BOOLEAN", at, value: false }],
      ["null", { type: "T_NULL", at }],
    ] as const) {
      if (rest.startsWith(word)) {
        this.index += word.length;
        return token;
      }
    }
    // cjson hands `+`, inf and nan to strtod too (it does not refuse invalid numbers when decoding).
    if ("+iInN".includes(char) && (char === "+" || /^(inf|nan)/i.test(rest))) return this.number();
    return { type: "T_ERROR", at, problem: "invalid token" };
  }

  private number(): Token {
    const at = this.index;
    // cjson copies the characters a number may hold (digits, signs, dots, letters a to y) and hands them to strtod.
    let end = at;
    while (end < this.bytes.length && /[0-9+\-.a-yA-Y]/.test(String.fromCharCode(this.byte(end)))) end++;
    const text = STRTOD.exec(this.bytes.subarray(at, end).toString("latin1"))?.[0];
    if (text === undefined) return { type: "T_ERROR", at, problem: "invalid number" };
    this.index += text.length;
    const unsigned = text.replace(/^[+-]/, "");
    const sign = text.startsWith("-") ? -1 : 1;
    const value = /^(inf|nan)/i.test(unsigned) ? Number.NaN : /^0x/i.test(unsigned) ? sign * hexNumber(unsigned.slice(2)) : Number(text);
    // cjson reads on; the text is refused only if it is otherwise good JSON.
    if (!Number.isFinite(value)) this.beyondJson ??= `a number JSON cannot carry (${text}) at character ${at + 1}`;
    return { type: "T_NUMBER", at, value };
  }

  private string(): Token {
    const at = this.index;
    const out: number[] = [];
    this.index++;
    for (;;) {
      const code = this.byte(this.index);
      if (code === 0x22) break;
      if (code === 0) return { type: "T_ERROR", at: this.index, problem: "unexpected end of string" };
      if (code !== 0x5c) {
        out.push(code);
        this.index++;
        continue;
      }
      const escaped = String.fromCharCode(this.byte(this.index + 1));
      if (escaped === "u") {
        const length = this.unicodeEscape(out);
        if (length === 0) return { type: "T_ERROR", at: this.index, problem: "invalid unicode escape code" };
        this.index += length;
        continue;
      }
      const translated = ESCAPES[escaped];
      if (translated === undefined) return { type: "T_ERROR", at: this.index, problem: "invalid escape code" };
      out.push(translated);
      this.index += 2;
    }
    this.index++;
    return { type: "T_STRING", at, value: Buffer.from(out).toString("utf8") };
  }

  /** Appends the UTF-8 of the `\uXXXX` (or surrogate pair) at the index; its length in bytes, 0 when invalid. */
  private unicodeEscape(out: number[]): number {
    const hex4 = (from: number) => {
      const digits = this.bytes.subarray(from, from + 4).toString("latin1");
      return /^[0-9a-fA-F]{4}$/.test(digits) ? Number.parseInt(digits, 16) : -1;
    };
    let codepoint = hex4(this.index + 2);
    if (codepoint < 0) return 0;
    let length = 6;
    if ((codepoint & 0xf800) === 0xd800) {
      if (codepoint & 0x400) return 0;
      if (this.byte(this.index + 6) !== 0x5c || this.byte(this.index + 7) !== 0x75) return 0;
      const low = hex4(this.index + 8);
      if (low < 0 || (low & 0xfc00) !== 0xdc00) return 0;
      codepoint = (((codepoint & 0x3ff) << 10) | (low & 0x3ff)) + 0x10000;
      length = 12;
    }
    out.push(...Buffer.from(String.fromCodePoint(codepoint), "utf8"));
    return length;
  }
}

/** The value of a hexadecimal number's digits as strtod reads them (`1f`, `1.8`, `1p3`). */
function hexNumber(digits: string): number {
  const [mantissa = "", exponent] = digits.split(/[pP]/);
  const [whole = "", fraction = ""] = mantissa.split(".");
  let value = whole === "" ? 0 : Number.parseInt(whole, 16);
  for (const [i, digit] of [...fraction].entries()) value += Number.parseInt(digit, 16) / 16 ** (i + 1);
  return exponent === undefined ? value : value * 2 ** Number(exponent);
}
