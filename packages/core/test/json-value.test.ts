import { describe, expect, it } from "vitest";
import { z } from "zod";
import { EnqueueInputSchema, JsonSchema, ValidationError, normalizeEnqueueInput } from "../src/index.js";
import { MAX_JSON_VALUE_DEPTH, jsonProblem } from "../src/json-value.js";

/** The schema JsonSchema was before: zod's recursive union, kept here as the reference for which values are JSON. */
const ZOD_UNION: z.ZodType = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(ZOD_UNION), z.record(z.string(), ZOD_UNION)]),
);

class Point {
  x = 1;
}
const EDGES: Array<[string, unknown]> = [
  ["a string", "s"],
  ["zero", 0],
  ["minus zero", -0],
  ["a float", 1.5],
  ["NaN", Number.NaN],
  ["Infinity", Number.POSITIVE_INFINITY],
  ["true", true],
  ["null", null],
  ["undefined", undefined],
  ["a bigint", 1n],
  ["a function", () => 1],
  ["a symbol", Symbol("s")],
  ["a Date", new Date(0)],
  ["a Map", new Map([["a", 1]])],
  ["a class instance", new Point()],
  ["a boxed string", Object("s")],
  ["an object without a prototype", Object.assign(Object.create(null), { a: 1 })],
  ["an object with a symbol key", { [Symbol("s")]: 1, a: 1 }],
  ["an undefined value", { a: undefined }],
  // biome-ignore lint/suspicious/noSparseArray: the hole is the case
  ["an array with a hole", [1, , 3]],
  ["an array with a property", Object.assign([1], { x: 2 })],
  ["nested undefined", { a: [1, { b: undefined }] }],
  ["nested NaN", [[[Number.NaN]]]],
  ["a deep valid value", { a: [{ b: [{ c: "d" }, 1, null, true] }] }],
];

/** A random value, JSON or not, for comparing the two checks beyond the listed cases. */
function randomValue(depth: number, random: () => number): unknown {
  const pick = Math.floor(random() * (depth > 3 ? 8 : 11));
  switch (pick) {
    case 0:
      return "text";
    case 1:
      return Math.floor(random() * 1000) - 500;
    case 2:
      return random() < 0.5;
    case 3:
      return null;
    case 4:
      return [undefined, Number.NaN, new Date(0), 1n][Math.floor(random() * 4)];
    case 5:
      return random() * 10;
    case 6:
      return "";
    case 7:
      return Number.POSITIVE_INFINITY;
    case 8:
      return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(depth + 1, random));
    default:
      return Object.fromEntries(Array.from({ length: Math.floor(random() * 4) }, (_, i) => [`k${i}`, randomValue(depth + 1, random)]));
  }
}

describe("JsonSchema: which values are JSON", () => {
  it("accepts and refuses what zod's recursive union did, on every edge case", () => {
    for (const [name, value] of EDGES) {
      expect([name, JsonSchema.safeParse(value).success]).toEqual([name, ZOD_UNION.safeParse(value).success]);
    }
  });

  it("agrees with zod's union on 2,000 random values (a fixed seed)", () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    let refused = 0;
    for (let i = 0; i < 2000; i++) {
      const value = randomValue(0, random);
      const expected = ZOD_UNION.safeParse(value).success;
      expect(JsonSchema.safeParse(value).success).toBe(expected);
      if (!expected) refused++;
    }
    // Both answers occur, so agreement is not agreement on one answer only.
    expect(refused).toBeGreaterThan(200);
    expect(refused).toBeLessThan(1800);
  });

  it("hands the value on as it came, an own __proto__ key included (zod's record copy dropped it)", () => {
    const data = JSON.parse('{"__proto__": {"x": 1}, "b": [1, 2]}');
    const parsed = JsonSchema.parse(data);
    expect(parsed).toBe(data);
    expect(JSON.stringify(parsed)).toBe('{"__proto__":{"x":1},"b":[1,2]}');
  });

  it("names where a value stops being JSON, and why", () => {
    expect(jsonProblem({ a: [1, { b: undefined }] })).toEqual({ path: ["a", 1, "b"], message: "undefined is not a JSON value" });
    expect(jsonProblem([Number.NaN])).toEqual({ path: [0], message: "NaN is not a JSON number" });
    expect(jsonProblem({ when: new Date(0) })).toEqual({ path: ["when"], message: "a Date object is not a JSON value" });
    const enqueue = () => normalizeEnqueueInput({ name: "x", data: { list: [1, () => 2] } });
    expect(enqueue).toThrow(ValidationError);
    expect(enqueue).toThrow("invalid job: data.list.1: a function is not a JSON value");
  });

  it("refuses a value that holds itself, or is nested too deep, with an error and no stack overflow", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(jsonProblem(cyclic)?.message).toBe(`nested deeper than ${MAX_JSON_VALUE_DEPTH} levels`);
    let deep: unknown = 1;
    for (let i = 0; i < MAX_JSON_VALUE_DEPTH + 1; i++) deep = [deep];
    expect(EnqueueInputSchema.safeParse({ name: "x", data: deep }).success).toBe(false);
    let fits: unknown = 1;
    for (let i = 0; i < MAX_JSON_VALUE_DEPTH; i++) fits = [fits];
    expect(EnqueueInputSchema.safeParse({ name: "x", data: fits }).success).toBe(true);
  });
});
