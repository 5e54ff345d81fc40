import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Backend, JobCounts } from "@switchyard/core";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADAPTERS } from "../src/adapters.js";
import { type NamedBackend, openBackend } from "../src/backends.js";
import { COST_SHARE, LARGE_QUEUE_JOBS, QueueCounts } from "../src/queue-counts.js";
import { type TestGateway, openTestGateway } from "./helpers.js";

/** What one count of the store takes on the test's clock: a large queue's count on a busy server. */
const COUNT_MS = 100;

async function fill(backend: Backend, queue: string, jobs: number): Promise<void> {
  for (let from = 0; from < jobs; from += 1_000)
    await backend.enqueueBulk(
      queue,
      Array.from({ length: Math.min(1_000, jobs - from) }, () => ({ name: "kept", data: {} })),
    );
}

describe("QueueCounts: the dashboard's and /metrics' counts at a bounded cost (real SQLite store, a clock the test moves)", () => {
  let dir: string;
  let store: NamedBackend;
  let now = 1_000_000;
  /** The counts calls that reached the store, by queue. */
  const storeReads: string[] = [];
  /** While set, the store's counts wait for it: reads in flight that the test holds. */
  let gate: Promise<void> | null = null;
  /** The store, its counts taking COUNT_MS on the test's clock and noted. */
  let named: NamedBackend;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "switchyard-queue-counts-"));
    store = await openBackend("main", { type: "workerqueue-sql", url: `sqlite:${join(dir, "jobs.sqlite")}` } as never, ADAPTERS);
    await fill(store.backend, "large", LARGE_QUEUE_JOBS);
    await fill(store.backend, "small", 3);
    const counts = async (queue: string): Promise<JobCounts> => {
      storeReads.push(queue);
      if (gate) await gate;
      const counted = await store.backend.counts(queue);
      now += COUNT_MS;
      return counted;
    };
    named = { ...store, backend: Object.assign(Object.create(store.backend), { counts }) };
  });
  afterAll(async () => {
    await store.backend.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const readsOf = (queue: string) => storeReads.filter((read) => read === queue).length;

  it("reads a queue under LARGE_QUEUE_JOBS afresh at every call, so a job enqueued shows at once", async () => {
    const counts = new QueueCounts(() => now);
    expect((await counts.read(named, "small")).waiting).toBe(3);
    await store.backend.enqueue("small", { name: "new", data: {} });
    expect((await counts.read(named, "small")).waiting).toBe(4);
    expect(readsOf("small")).toBe(2);
  });

  it("serves a large queue's counts until they are older than COST_SHARE times what the count took, then counts again", async () => {
    const counts = new QueueCounts(() => now);
    const reads = readsOf("large");
    expect((await counts.read(named, "large")).waiting).toBe(LARGE_QUEUE_JOBS);
    await store.backend.enqueue("large", { name: "new", data: {} });
    now += COST_SHARE * COUNT_MS - 1;
    // Still the count of a moment ago: the store was not asked.
    expect((await counts.read(named, "large")).waiting).toBe(LARGE_QUEUE_JOBS);
    expect(readsOf("large")).toBe(reads + 1);
    now += 1;
    expect((await counts.read(named, "large")).waiting).toBe(LARGE_QUEUE_JOBS + 1);
    expect(readsOf("large")).toBe(reads + 2);
  });

  /** Reads of `queue` made while the store's answer is held: every reader's answer, and the store's reads. */
  async function heldReads(counts: QueueCounts, queue: string, readers: number) {
    const reads = readsOf(queue);
    let open = () => {};
    gate = new Promise((resolve) => {
      open = resolve;
    });
    const answers = Array.from({ length: readers }, () => counts.read(named, queue));
    gate = null;
    open();
    return { answers: await Promise.all(answers), storeReads: readsOf(queue) - reads };
  }

  it("lets the readers of a queue share the count in flight, a large queue's and a first count alike", async () => {
    const counts = new QueueCounts(() => now);
    await counts.read(named, "large");
    now += COST_SHARE * COUNT_MS;
    const large = await heldReads(counts, "large", 3);
    expect(large.storeReads).toBe(1);
    for (const answer of large.answers) expect(answer).toBe(large.answers[0]);
    // A queue this reader has never counted: a store slow to count it is not asked three times over.
    const first = await heldReads(new QueueCounts(() => now), "small", 3);
    expect(first.storeReads).toBe(1);
    for (const answer of first.answers) expect(answer).toBe(first.answers[0]);
  });

  it("reads a queue afresh again once its count falls under LARGE_QUEUE_JOBS", async () => {
    const counts = new QueueCounts(() => now);
    await fill(store.backend, "shrinking", LARGE_QUEUE_JOBS);
    await counts.read(named, "shrinking");
    // A peer (workqd, a cleanup script) deletes a row.
    const db = new Database(join(dir, "jobs.sqlite"));
    db.prepare("delete from jobs where id = (select max(id) from jobs where sy_queue = 'shrinking')").run();
    db.close();
    now += COST_SHARE * COUNT_MS;
    expect((await counts.read(named, "shrinking")).waiting).toBe(LARGE_QUEUE_JOBS - 1);
    await store.backend.enqueue("shrinking", { name: "new", data: {} });
    // Under the line now: read at once, whatever the count cost.
    expect((await counts.read(named, "shrinking")).waiting).toBe(LARGE_QUEUE_JOBS);
    expect(readsOf("shrinking")).toBe(3);
  });
});

describe("the gateway's dashboard reads a large queue's counts through QueueCounts, the API at once", () => {
  let t: TestGateway;
  const queue = "large";
  beforeAll(async () => {
    t = await openTestGateway();
    // A count of 50,000 rows takes SQLite milliseconds, so it serves for a fair fraction of a second.
    for (let page = 0; page < 50; page++) {
      const response = await t.request("POST", `/v1/queues/${queue}/jobs/bulk`, {
        jobs: Array.from({ length: 1_000 }, () => ({ name: "kept" })),
      });
      expect(response.status).toBe(201);
    }
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it("answers the queue's overview from the count just read, and GET .../counts with the job just enqueued", async () => {
    const before = await t.request("GET", `/v1/queues/${queue}/overview`);
    expect(before.json.counts.waiting).toBe(50_000);
    expect((await t.request("POST", `/v1/queues/${queue}/jobs`, { name: "new" })).status).toBe(201);
    expect((await t.request("GET", `/v1/queues/${queue}/overview`)).json.counts.waiting).toBe(50_000);
    expect((await t.request("GET", `/v1/queues/${queue}/counts`)).json.counts.waiting).toBe(50_001);
  });
});
