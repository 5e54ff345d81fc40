import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestGateway, openTestGateway, until } from "./helpers.js";

interface Family {
  name: string;
  type: string;
  metrics: Array<{ labels?: Record<string, string>; value?: string; count?: string; buckets?: Record<string, string> }>;
}

let t: TestGateway;
beforeAll(async () => {
  t = await openTestGateway();
});
afterAll(async () => {
  await t.cleanup();
});

async function scrapeText(): Promise<string> {
  const res = await t.gateway.app.request("/metrics");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain");
  return res.text();
}

async function scrape(): Promise<Family[]> {
  return parsePrometheusTextFormat(await scrapeText()) as Family[];
}

/** The value of one counter or gauge sample, found by its labels. */
function sample(families: Family[], name: string, labels: Record<string, string>): number | undefined {
  const family = families.find((candidate) => candidate.name === name);
  const found = family?.metrics.find((metric) => Object.entries(labels).every(([key, value]) => metric.labels?.[key] === value));
  return found?.value === undefined ? undefined : Number(found.value);
}

/**
 * A histogram's observation count for one label set, read from its `_count` line: the parser merges
 * a histogram's label sets into one, so histograms are read from the text.
 */
function observations(text: string, name: string, labels: Record<string, string>): number {
  const line = text
    .split("\n")
    .find(
      (candidate) => candidate.startsWith(`${name}_count{`) && Object.entries(labels).every(([k, v]) => candidate.includes(`${k}="${v}"`)),
    );
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
}

describe("/metrics", () => {
  it("counts requests by door, route and status, and jobs enqueued, completed, failed and retried by backend and queue", async () => {
    const queue = `metrics-${Date.now()}`;
    const before = await scrape();
    const requestsBefore = sample(before, "switchyard_http_requests_total", { route: "/v1/queues/:queue/jobs", status: "201" }) ?? 0;
    for (const name of ["a", "b", "c"]) await t.request("POST", `/v1/queues/${queue}/jobs`, { name, maxAttempts: 2 });
    const [first, second, third] = (await t.request("POST", `/v1/queues/${queue}/reserve`, { worker: "w", count: 3 })).json.jobs;
    await t.request("POST", `/v1/queues/${queue}/jobs/${first.id}/complete`, { worker: "w" });
    await t.request("POST", `/v1/queues/${queue}/jobs/${second.id}/fail`, { worker: "w", error: { message: "x" }, retry: false });
    await t.request("POST", `/v1/queues/${queue}/jobs/${third.id}/fail`, { worker: "w", error: { message: "y" }, retryDelay: 60_000 });
    await t.request("GET", `/v1/queues/${queue}/jobs/no-such-job`);

    const after = await scrape();
    const jobs = (event: string) => sample(after, "switchyard_jobs_total", { backend: "main", queue, event });
    expect([jobs("enqueued"), jobs("completed"), jobs("failed"), jobs("retried")]).toEqual([3, 1, 1, 1]);
    expect(sample(after, "switchyard_http_requests_total", { door: "native", route: "/v1/queues/:queue/jobs", status: "201" })).toBe(
      requestsBefore + 3,
    );
    const text = await scrapeText();
    expect(observations(text, "switchyard_http_request_duration_seconds", { route: "/v1/queues/:queue/reserve" })).toBeGreaterThanOrEqual(
      1,
    );
    expect(
      observations(text, "switchyard_backend_call_duration_seconds", { backend: "main", operation: "complete" }),
    ).toBeGreaterThanOrEqual(1);
    // Counted on scrape and reused for 5 s: the scrape before these jobs still stands...
    const queueJobs = (families: Family[], state: string) => sample(families, "switchyard_queue_jobs", { backend: "main", queue, state });
    expect(queueJobs(after, "completed")).toBeUndefined();
    // ...until it lapses, and the next scrape counts the queue afresh.
    let fresh: Family[] = [];
    await until(
      async () => {
        fresh = await scrape();
        return queueJobs(fresh, "completed") !== undefined;
      },
      "the job counts to be counted again",
      15_000,
    );
    expect(["completed", "failed", "delayed", "waiting"].map((state) => queueJobs(fresh, state))).toEqual([1, 1, 1, 0]);
  });

  it("counts a backend call that failed by its error code", async () => {
    const code = (families: Family[]) =>
      sample(families, "switchyard_backend_errors_total", { backend: "main", operation: "heartbeat", code: "NOT_FOUND" }) ?? 0;
    const before = code(await scrape());
    await t.request("POST", "/v1/queues/errors/jobs/missing/heartbeat", { worker: "w" });
    expect(code(await scrape())).toBe(before + 1);
  });
});
