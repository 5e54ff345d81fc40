import { createSocket } from "node:dgram";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestGateway, openTestGateway, until } from "./helpers.js";

/** A legacy producer's INSERT (spec §8.2), straight into the SQLite file, bypassing the gateway. */
function legacyInsert(file: string, name: string, data: string): number {
  const db = new Database(file);
  try {
    const now = new Date().toISOString().slice(0, 19).replace("T", " ");
    return Number(
      db
        .prepare("insert into jobs (name, status, attempts, locked_queue_id, data, created_at) values (?, 'pending', 0, '', ?, ?)")
        .run(name, data, now).lastInsertRowid,
    );
  } finally {
    db.close();
  }
}

async function sendDatagram(port: number, payload: Buffer | string): Promise<void> {
  const socket = createSocket("udp4");
  await new Promise<void>((resolve, reject) => socket.send(payload, port, "127.0.0.1", (error) => (error ? reject(error) : resolve())));
  socket.close();
}

describe("Worker Queue door", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await openTestGateway();
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it("POST /workerqueue/jobs writes the columns a legacy producer writes, and GET answers the row", async () => {
    const created = await t.request("POST", "/workerqueue/jobs", {
      name: "magick",
      data: { operation: "resize", rows: 64 },
      taskable_type: "Photo",
      taskable_id: 42,
      queue: "photos",
    });
    expect(created.status).toBe(201);
    const { job } = created.json;
    expect(job).toMatchObject({
      name: "magick",
      queue: "photos",
      data: { operation: "resize", rows: 64 },
      status: "pending",
      attempts: 0,
      duration: null,
      details: null,
      locked_by: null,
      taskable_type: "Photo",
      taskable_id: 42,
    });
    const row = t.nativeRows().find((candidate) => String(candidate.id) === job.id);
    expect(row).toMatchObject({ name: "magick", status: "pending", locked_queue_id: "", taskable_type: "Photo", taskable_id: 42 });
    expect(JSON.parse(String(row?.data))).toEqual({ operation: "resize", rows: 64 });
    expect((await t.request("GET", `/workerqueue/jobs/${job.id}?queue=photos`)).json).toEqual({ job });
  });

  it("a worker reserves, reports progress a page can poll, and completes: processing with locked_by, then complete with a duration", async () => {
    const { job } = (await t.request("POST", "/workerqueue/jobs", { name: "encode", data: { file: "a.mov" }, queue: "video" })).json;
    const reserved = await t.request("POST", "/workerqueue/reserve", { worker: "encoder-1", queue: "video" });
    expect(reserved.json.jobs).toMatchObject([{ id: job.id, status: "processing", locked_by: "encoder-1", attempts: 1 }]);
    expect(t.nativeRows().find((row) => String(row.id) === job.id)?.status).toBe("processing");

    const reported = await t.request("POST", `/workerqueue/jobs/${job.id}/progress`, {
      worker: "encoder-1",
      queue: "video",
      progress: { percent: 40 },
    });
    expect(reported.json.job.progress).toEqual({ percent: 40 });
    const polled = await t.request("GET", `/workerqueue/jobs/${job.id}/progress?queue=video`);
    expect(polled.json).toEqual({ id: job.id, status: "processing", progress: { percent: 40 }, finished: false });
    expect(polled.headers.get("cache-control")).toBe("no-store");

    const done = await t.request("POST", `/workerqueue/jobs/${job.id}/complete`, { worker: "encoder-1", queue: "video" });
    expect(done.json.job).toMatchObject({ status: "complete", locked_by: null, duration: expect.any(Number) });
    expect((await t.request("GET", `/workerqueue/jobs/${job.id}/progress?queue=video`)).json).toMatchObject({
      status: "complete",
      finished: true,
    });
    expect(t.nativeRows().find((row) => String(row.id) === job.id)).toMatchObject({ status: "complete", locked_queue_id: "" });
  });

  it("error marks the job `error` with its details for good, as legacy workers never retry, unless retry is asked for", async () => {
    const { job } = (await t.request("POST", "/workerqueue/jobs", { name: "run", queue: "errors" })).json;
    await t.request("POST", "/workerqueue/reserve", { worker: "w", queue: "errors" });
    const failed = await t.request("POST", `/workerqueue/jobs/${job.id}/error`, { worker: "w", queue: "errors", details: "exit status 3" });
    expect(failed.json.job).toMatchObject({ status: "error", details: "exit status 3", attempts: 1 });
    expect(t.nativeRows().find((row) => String(row.id) === job.id)).toMatchObject({ status: "error", details: "exit status 3" });

    const { job: again } = (await t.request("POST", "/workerqueue/jobs", { name: "run", queue: "errors" })).json;
    await t.request("POST", "/workerqueue/reserve", { worker: "w", queue: "errors" });
    const retried = await t.request("POST", `/workerqueue/jobs/${again.id}/error`, {
      worker: "w",
      queue: "errors",
      details: "busy",
      retry: true,
    });
    expect(retried.json.job).toMatchObject({ status: "pending", details: "busy" });
  });

  it("a row a legacy producer INSERTed is reserved through the door on the default queue", async () => {
    const id = legacyInsert(t.file, "magick", '{"rows":32}');
    const reserved = await t.request("POST", "/workerqueue/reserve", { worker: "http-worker" });
    expect(reserved.json.jobs).toMatchObject([{ id: String(id), name: "magick", data: { rows: 32 }, status: "processing" }]);
  });

  it("an empty reserve waits out waitMs and answers no jobs; one whose client went away stops waiting", async () => {
    const started = Date.now();
    const empty = await t.request("POST", "/workerqueue/reserve", { worker: "w", queue: "idle", waitMs: 300 });
    expect(empty.json).toEqual({ jobs: [] });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);

    const client = new AbortController();
    const init = { method: "POST", body: JSON.stringify({ worker: "w", queue: "gone", waitMs: 60_000 }), signal: client.signal };
    const abandoned = Promise.resolve(t.gateway.app.request("/workerqueue/reserve", init)).catch(() => undefined);
    await until(() => t.gateway.wakeups.parked("gone") === 1, "the reserve to park");
    client.abort();
    await until(() => t.gateway.wakeups.parked("gone") === 0, "the abandoned reserve to stop waiting");
    await abandoned;
    const { job } = (await t.request("POST", "/workerqueue/jobs", { name: "kept", queue: "gone" })).json;
    expect((await t.request("GET", `/workerqueue/jobs/${job.id}?queue=gone`)).json.job.status).toBe("pending");
  });

  it("bad input is a 400 naming the field, and nothing is stored; SQL in a name is stored as text", async () => {
    const before = t.totalRows();
    const cases: Array<[unknown, string]> = [
      [{ data: {} }, "name"],
      [{ name: 5 }, "name"],
      [{ name: "x", taskable_id: 2 ** 31 }, "taskable_id"],
      [{ name: "x", taskable_id: "7" }, "taskable_id"],
      [{ name: "x", colour: "red" }, "colour"],
      [{ name: "x", queue: "" }, "queue"],
    ];
    for (const [body, field] of cases) {
      const res = await t.request("POST", "/workerqueue/jobs", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.message).toContain(field);
    }
    const malformed = await t.request("POST", "/workerqueue/jobs", '{"name": "x",');
    expect(malformed.status).toBe(400);
    expect((await t.request("POST", "/workerqueue/reserve", { queue: "q" })).status).toBe(400);
    expect((await t.request("POST", "/workerqueue/reserve", { worker: "w", waitMs: -1 })).status).toBe(400);
    expect((await t.request("GET", "/workerqueue/jobs/999999")).status).toBe(404);
    expect(t.totalRows()).toBe(before);

    const injected = "x'); drop table jobs; --";
    const { job } = (await t.request("POST", "/workerqueue/jobs", { name: injected, queue: "sql" })).json;
    expect((await t.request("GET", `/workerqueue/jobs/${job.id}?queue=sql`)).json.job.name).toBe(injected);
    expect(t.nativeRows().some((row) => row.name === injected)).toBe(true);
  });
});

describe("Worker Queue door: the UDP wake-up port", () => {
  let t: TestGateway;
  beforeAll(async () => {
    // Looking again only every minute: a reserve that returns sooner was woken by the datagram.
    t = await openTestGateway({ doors: { workerqueue: { udp: { port: 0, host: "127.0.0.1" } } }, longPollIntervalMs: 60_000 });
  });
  afterAll(async () => {
    await t.cleanup();
  });

  const port = () => t.gateway.wakeListener?.port ?? Number.NaN;

  it("a reserve parked on the door returns a legacy INSERT within 100 ms of the datagram that follows it (median of 5)", async () => {
    const latencies: number[] = [];
    for (let n = 0; n < 5; n++) {
      const waiting = t.request("POST", "/workerqueue/reserve", { worker: "w", waitMs: 30_000 });
      await until(() => t.gateway.wakeups.parked("default") === 1, "the reserve to park");
      const id = legacyInsert(t.file, "magick", `{"n":${n}}`);
      const sent = Date.now();
      await sendDatagram(port(), "1");
      const reserved = await waiting;
      latencies.push(Date.now() - sent);
      expect(reserved.json.jobs).toMatchObject([{ id: String(id), data: { n } }]);
    }
    latencies.sort((a, b) => a - b);
    expect(latencies[2]).toBeLessThan(100);
  });

  it("any datagram wakes, empty, garbage or oversized, as workqd ignores the payload; none stores anything or stops the port", async () => {
    const payloads = [Buffer.alloc(0), Buffer.from([0xff, 0x00, 0xfe]), Buffer.alloc(60_000, 0x41), "'; drop table jobs; --", "s"];
    for (const [n, payload] of payloads.entries()) {
      const waiting = t.request("POST", "/workerqueue/reserve", { worker: "w", waitMs: 30_000 });
      await until(() => t.gateway.wakeups.parked("default") === 1, "the reserve to park");
      const id = legacyInsert(t.file, "run", `{"payload":${n}}`);
      const rows = t.totalRows();
      await sendDatagram(port(), payload);
      expect((await waiting).json.jobs).toMatchObject([{ id: String(id), data: { payload: n } }]);
      expect(t.totalRows()).toBe(rows);
    }
    expect((await t.request("GET", "/health")).status).toBe(200);
  });
});
