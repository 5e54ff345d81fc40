import { describe, expect, it } from "vitest";
import { MAX_RUN_AT, STORABLE_TEXT_PATTERN, normalizeEnqueueInput, storableText } from "../src/index.js";

describe("storableText", () => {
  const schema = storableText("a name");
  const pattern = new RegExp(STORABLE_TEXT_PATTERN);
  const samples = [
    "plain",
    "héllo ✓",
    "emoji 😍 pair",
    "\u{1F600}",
    "lone \ud800 high",
    "lone \udc00 low",
    "reversed \udc00\ud800",
    "nul \u0000 inside",
  ];

  it("refuses NUL and lone surrogates, keeps surrogate pairs, and its document pattern agrees on every sample", () => {
    const accepted = samples.filter((sample) => schema.safeParse(sample).success);
    expect(accepted).toEqual(["plain", "héllo ✓", "emoji 😍 pair", "\u{1F600}"]);
    for (const sample of samples) expect(pattern.test(sample), JSON.stringify(sample)).toBe(accepted.includes(sample));
  });
});

describe("MAX_RUN_AT", () => {
  it("is the last millisecond glide-mq's score can hold apart from the priority, and one past it is refused", () => {
    expect(MAX_RUN_AT).toBe(2 ** 42 - 1);
    expect(normalizeEnqueueInput({ name: "n", runAt: MAX_RUN_AT }).runAt).toBe(MAX_RUN_AT);
    expect(() => normalizeEnqueueInput({ name: "n", runAt: MAX_RUN_AT + 1 })).toThrow(/runAt/);
  });
});
