import { describe, expect, it } from "vitest";
import {
  DEFAULT_MAX_ATTEMPTS,
  MAX_DELAY_MS,
  ValidationError,
  backoffDelay,
  decodeCursor,
  encodeCursor,
  normalizeEnqueueInput,
  runAtOf,
} from "../src/index.js";

describe("normalizeEnqueueInput", () => {
  it("fills every default the job model documents", () => {
    expect(normalizeEnqueueInput({ name: "x" })).toEqual({
      name: "x",
      data: null,
      priority: 0,
      maxAttempts: DEFAULT_MAX_ATTEMPTS,
      backoff: null,
      tags: [],
      dependsOn: [],
    });
  });

  it("rejects an empty name with a ValidationError naming the field", () => {
    expect(() => normalizeEnqueueInput({ name: "" })).toThrow(ValidationError);
    expect(() => normalizeEnqueueInput({ name: "" })).toThrow(/name/);
  });

  it("rejects a delay and a runAt together, and an id longer than 255 characters", () => {
    expect(() => normalizeEnqueueInput({ name: "x", delay: 5, runAt: 1 })).toThrow(/delay or runAt/);
    expect(() => normalizeEnqueueInput({ name: "x", id: "i".repeat(256) })).toThrow(/id/);
    expect(normalizeEnqueueInput({ name: "x", id: "i".repeat(255) }).id).toHaveLength(255);
  });

  it("rejects data that is not JSON (a function) and a fractional priority", () => {
    expect(() => normalizeEnqueueInput({ name: "x", data: (() => 1) as never })).toThrow(/data/);
    expect(() => normalizeEnqueueInput({ name: "x", priority: 1.5 })).toThrow(/priority/);
  });
});

describe("runAtOf", () => {
  const now = 1_700_000_000_000;
  it("is null without a delay, now + delay with one, and null for a runAt in the past", () => {
    expect(runAtOf(normalizeEnqueueInput({ name: "x" }), now)).toBeNull();
    expect(runAtOf(normalizeEnqueueInput({ name: "x", delay: 500 }), now)).toBe(now + 500);
    expect(runAtOf(normalizeEnqueueInput({ name: "x", runAt: now - 1 }), now)).toBeNull();
    expect(runAtOf(normalizeEnqueueInput({ name: "x", runAt: now + 9 }), now)).toBe(now + 9);
  });
});

describe("backoffDelay", () => {
  it("waits the same for fixed backoff and doubles per attempt for exponential", () => {
    expect(backoffDelay({ type: "fixed", delay: 100 }, 3)).toBe(100);
    expect([1, 2, 3].map((n) => backoffDelay({ type: "exponential", delay: 100 }, n))).toEqual([100, 200, 400]);
    expect(backoffDelay(null, 2)).toBe(0);
    expect(backoffDelay({ type: "exponential", delay: 1000 }, 1_000_000)).toBe(MAX_DELAY_MS);
  });
});

describe("cursors", () => {
  const isNumber = (v: unknown): v is number => typeof v === "number";
  it("round-trip a position and reject garbage with a ValidationError", () => {
    expect(decodeCursor(encodeCursor(42), isNumber)).toBe(42);
    expect(decodeCursor(undefined, isNumber)).toBeUndefined();
    expect(() => decodeCursor("not-a-cursor", isNumber)).toThrow(ValidationError);
    expect(() => decodeCursor(encodeCursor("text"), isNumber)).toThrow(ValidationError);
  });
});
