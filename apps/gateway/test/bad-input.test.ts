import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestGateway, openTestGateway } from "./helpers.js";

let t: TestGateway;
beforeAll(async () => {
  // Only `jobs.*` queues are routed, so any other queue name is an unknown queue pattern.
  t = await openTestGateway({ routes: [{ pattern: "jobs.*", backend: "main" }] });
});
afterAll(async () => {
  await t.cleanup();
});

const twoMegabytes = JSON.stringify({ name: "Big", data: "x".repeat(2 * 1024 * 1024) });
const twoMegabytesCloudq = JSON.stringify({ job: { klass: "Big", args: ["x".repeat(2 * 1024 * 1024)] } });

const deeplyNested = "[".repeat(100_000) + "]".repeat(100_000);

/** [what, method, path, body, status, message fragment] */
const nativeCases: Array<[string, string, string, string | object | undefined, number, string]> = [
  ["malformed JSON", "POST", "/v1/queues/jobs.a/jobs", '{"name": "A",', 400, "not valid JSON"],
  ["an empty body", "POST", "/v1/queues/jobs.a/jobs", "", 400, "body is empty"],
  ["a job without name", "POST", "/v1/queues/jobs.a/jobs", { data: [1] }, 400, "name"],
  ["a name that is not a string", "POST", "/v1/queues/jobs.a/jobs", { name: 42 }, 400, "name"],
  ["a 2 MB body", "POST", "/v1/queues/jobs.a/jobs", twoMegabytes, 413, "1 MiB"],
  ["a queue no route matches", "POST", "/v1/queues/other/jobs", { name: "A" }, 404, 'queue "other"'],
  ["data nested 100 000 levels deep", "POST", "/v1/queues/jobs.a/jobs", `{"name":"A","data":${deeplyNested}}`, 400, "nested deeper"],
  ["a queue name over 255 characters", "POST", `/v1/queues/jobs.${"x".repeat(260)}/jobs`, { name: "A" }, 400, "queue name"],
  ["a bulk batch with one bad item", "POST", "/v1/queues/jobs.a/jobs/bulk", { jobs: [{ name: "ok" }, { name: "" }] }, 400, "jobs.1.name"],
  ["an empty bulk batch", "POST", "/v1/queues/jobs.a/jobs/bulk", { jobs: [] }, 400, "jobs"],
  ["a reserve without worker", "POST", "/v1/queues/jobs.a/reserve", {}, 400, "worker"],
  ["a reserve count of 0", "POST", "/v1/queues/jobs.a/reserve", { worker: "w", count: 0 }, 400, "count"],
  ["an unknown body field", "POST", "/v1/queues/jobs.a/reserve", { worker: "w", lease: 5 }, 400, "lease"],
  ["a bad state filter", "GET", "/v1/queues/jobs.a/jobs?state=running", undefined, 400, "state must be one of"],
  ["a missing state filter", "GET", "/v1/queues/jobs.a/jobs", undefined, 400, "state"],
  ["a bad limit", "GET", "/v1/queues/jobs.a/jobs?state=waiting&limit=abc", undefined, 400, "limit"],
  ["a forged cursor", "GET", "/v1/queues/jobs.a/jobs?state=waiting&cursor=not-a-cursor", undefined, 400, "cursor"],
  ["a fail without error", "POST", "/v1/queues/jobs.a/jobs/1/fail", { worker: "w" }, 400, "error"],
  // JSON.stringify writes a lone surrogate as the escape \ud800, as a client would send it.
  ["an id with a lone UTF-16 surrogate", "POST", "/v1/queues/jobs.a/jobs", { name: "A", id: "\ud800x" }, 400, "lone UTF-16 surrogate"],
  ["an unknown route", "GET", "/v1/nowhere", undefined, 404, "no route"],
];

const cloudqCases: Array<[string, string, string, string | object | undefined, number, string]> = [
  ["malformed JSON", "POST", "/cloudq/jobs.a", '{"job": {"klass": ', 400, "not valid JSON"],
  ["a job without klass", "POST", "/cloudq/jobs.a", { job: { args: [1] } }, 400, "klass key required"],
  ["an empty klass", "POST", "/cloudq/jobs.a", { job: { klass: "", args: [1] } }, 400, "klass key required"],
  ["a body without job", "POST", "/cloudq/jobs.a", { work: { klass: "K" } }, 400, "job object required"],
  ["a job that is not an object", "POST", "/cloudq/jobs.a", { job: "K" }, 400, "job object required"],
  ["a job without args", "POST", "/cloudq/jobs.a", { job: { klass: "K" } }, 400, "args key required"],
  ["a body that is an array", "POST", "/cloudq/jobs.a", [{ klass: "K", args: [] }], 400, "job object required"],
  ["a 2 MB body", "POST", "/cloudq/jobs.a", twoMegabytesCloudq, 413, "1 MiB"],
  ["args nested 100 000 levels deep", "POST", "/cloudq/jobs.a", `{"job":{"klass":"K","args":${deeplyNested}}}`, 400, "nested deeper"],
  ["a queue no route matches", "POST", "/cloudq/other", { job: { klass: "K", args: [] } }, 404, 'queue "other"'],
  ["a reserve on a queue no route matches", "GET", "/cloudq/other", undefined, 404, 'queue "other"'],
];

describe("bad input answers 4xx with a message and leaves nothing behind", () => {
  for (const [what, method, path, body, status, fragment] of nativeCases) {
    it(`native door: ${what} -> ${status} {error:{code,message}}`, async () => {
      const before = t.totalRows();
      const res = await t.request(method, path, body);
      expect(res.status).toBe(status);
      expect(res.json.error.code).toEqual(expect.any(String));
      expect(res.json.error.message).toContain(fragment);
      expect(t.totalRows()).toBe(before);
    });
  }

  for (const [what, method, path, body, status, fragment] of cloudqCases) {
    it(`Cloudq door: ${what} -> ${status} {status:"error",message}`, async () => {
      const before = t.totalRows();
      const res = await t.request(method, path, body);
      expect(res.status).toBe(status);
      expect(res.json.status).toBe("error");
      expect(res.json.message).toContain(fragment);
      expect(t.totalRows()).toBe(before);
    });
  }

  it("a valid job on a routed queue is stored, so the probe above can see a write", async () => {
    const before = t.totalRows();
    const res = await t.request("POST", "/cloudq/jobs.a", { job: { klass: "K", args: [] } });
    expect(res.json).toEqual({ status: "success" });
    expect(t.totalRows()).toBe(before + 1);
  });
});
