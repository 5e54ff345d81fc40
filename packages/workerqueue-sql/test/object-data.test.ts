import type { Json } from "@switchyard/core";
import { afterAll, describe, expect, it } from "vitest";
import YAML from "yaml";
import { createWorkerQueueBackend, decodeData, encodeData } from "../src/index.js";
import { rawKnex, removeSqliteFile, urlFor } from "./dialects.js";

// workqd's modules build a GObject from `data` and mark a job `error` for anything but a JSON
// object; rjqueue's job classes index `data` as a Hash. Data of any other shape is wrapped.
const NOT_OBJECTS: Array<[string, Json]> = [
  ["an array (a Cloudq producer's args)", [{ data: "foobar" }, 2]],
  ["a string", "resize me"],
  ["a number", 42.5],
  ["a boolean", false],
  ["null", null],
  ["an object whose only key is the wrapper's", { sy_value: [1, 2] }],
];

describe("workerqueue-sql: data that is not a JSON object is stored as one", () => {
  for (const [what, data] of NOT_OBJECTS) {
    it(`${what} is a JSON object in the json format and reads back unchanged`, () => {
      const stored = encodeData(data, "json");
      const parsed = JSON.parse(stored) as unknown;
      expect(parsed).toBeTypeOf("object");
      expect(Array.isArray(parsed)).toBe(false);
      expect(parsed).not.toBeNull();
      expect(decodeData(stored)).toEqual(data);
    });

    it(`${what} is a Ruby Hash with symbol keys in the yaml format and reads back unchanged`, () => {
      const stored = encodeData(data, "yaml");
      expect(Object.keys(YAML.parse(stored, { version: "1.1" }) as object)).toEqual([":sy_value"]);
      expect(decodeData(stored)).toEqual(data);
    });
  }

  it("an object is stored as it is, so workqd modules read their properties", () => {
    const data = { operation: "resize", rows: 64, cols: 64 };
    expect(encodeData(data, "json")).toBe(JSON.stringify(data));
  });

  const url = urlFor("sqlite");
  afterAll(() => removeSqliteFile(url));

  it("a job enqueued with array data leaves an object in the row and hands the array to its worker", async () => {
    const backend = createWorkerQueueBackend({ url });
    const probe = rawKnex(url);
    try {
      const { job } = await backend.enqueue("archive", { name: "Archive", data: [{ data: "foobar" }] });
      const row = await probe("jobs").where("id", Number(job.id)).first("data");
      expect(JSON.parse(row.data)).toEqual({ sy_value: [{ data: "foobar" }] });
      const [reserved] = await backend.reserve("archive", { worker: "w" });
      expect(reserved?.data).toEqual([{ data: "foobar" }]);
    } finally {
      await backend.close();
      await probe.destroy();
    }
  });
});
