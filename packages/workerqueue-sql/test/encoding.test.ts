import type { Json } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { decodeData, encodeData } from "../src/index.js";

describe("data encoding", () => {
  it("yaml writes a Hash the way rjqueue's serialize :data does: Ruby header and symbol keys", () => {
    expect(encodeData({ id: 5, size: "64x32" }, "yaml")).toBe("--- \n:id: 5\n:size: 64x32\n");
  });

  it("reads rjqueue's YAML with symbol keys as plain JSON keys", () => {
    expect(decodeData("--- \n:id: 5\n:size: 64x32\n")).toEqual({ id: 5, size: "64x32" });
  });

  it("reads string keys and nested symbol keys of Ruby YAML alike", () => {
    expect(decodeData("--- \n:outer:\n  :inner: [1, two]\nplain: yes\n")).toEqual({ outer: { inner: [1, "two"] }, plain: true });
  });

  it("json writes what workq's C++ modules parse with json-glib", () => {
    const data = { original_filename: "a.png", operation: "resize", rows: 64, cols: 64 };
    expect(encodeData(data, "json")).toBe(JSON.stringify(data));
    expect(decodeData(JSON.stringify(data))).toEqual(data);
  });

  const values: Array<[string, Json]> = [
    [
      "a nested object",
      { text: 'héllo ✓ "q"\nline', n: -7, f: 3.25, t: true, none: null, list: [1, "two", { three: 3 }], deep: { e: [] } },
    ],
    ["strings YAML 1.1 would read as other types", { yes: "yes", on: "on", num: "0x1f", date: "2001-12-14", empty: "", colon: ":sym" }],
    ["an array", [1, { a: "b" }, []]],
    ["a scalar string", "--- not a header"],
    ["a number", 42],
    ["null", null],
    ["an empty object", {}],
  ];
  for (const [what, value] of values) {
    it(`${what} round-trips through yaml and through json unchanged`, () => {
      expect(decodeData(encodeData(value, "yaml"))).toEqual(value);
      expect(decodeData(encodeData(value, "json"))).toEqual(value);
    });
  }

  it("a value in neither format (free text from a legacy producer) is read as that string", () => {
    expect(decodeData("run /usr/bin/touch x")).toBe("run /usr/bin/touch x");
  });

  it("a NULL or empty data column reads as null", () => {
    expect(decodeData(null)).toBeNull();
    expect(decodeData("")).toBeNull();
  });
});
