import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestGateway, openTestGateway, until } from "./helpers.js";
import { type SseEvent, readEvents } from "./sse.js";

let t: TestGateway;
beforeAll(async () => {
  t = await openTestGateway();
});
afterAll(async () => {
  await t.cleanup();
});

const subscribe = (path: string, headers: Record<string, string> = {}) => readEvents(t.gateway.app, path, headers);

const typesOf = (events: SseEvent[], jobId: string) => events.filter((e) => e.data.jobId === jobId).map((e) => e.event);

describe("GET /v1/queues/:queue/events", () => {
  it("streams every lifecycle event of jobs driven through the other doors, in order per job, as SSE with ids", async () => {
    const queue = "events-doors";
    const watcher = subscribe(`/v1/queues/${queue}/events`);
    const res = await watcher.response;
    expect(res.headers.get("content-type")).toContain("text/event-stream");

    // Cloudq: publish, reserve, finish.
    await t.request("POST", `/cloudq/${queue}`, { job: { klass: "Mailer", args: [1] } });
    const cloudqId = (await t.request("GET", `/cloudq/${queue}`)).json.id as string;
    await t.request("DELETE", `/cloudq/${queue}/${cloudqId}`);
    // Worker Queue door: create, reserve, progress, error for good.
    const wqId = (await t.request("POST", "/workerqueue/jobs", { name: "thumb", queue })).json.job.id as string;
    await t.request("POST", "/workerqueue/reserve", { worker: "w", queue });
    await t.request("POST", `/workerqueue/jobs/${wqId}/progress`, { worker: "w", queue, progress: 50 });
    await t.request("POST", `/workerqueue/jobs/${wqId}/error`, { worker: "w", queue, details: "no" });
    // qless door: put, pop, retry, then pause and resume the queue.
    await t.request("POST", "/qless/put", { args: ["c", queue, "jid-1", "K", "{}", 0, "retries", 2] });
    await t.request("POST", "/qless/pop", { args: [queue, "w", 1] });
    await t.request("POST", "/qless/retry", { args: ["jid-1", queue, "w"] });
    await t.request("POST", `/v1/queues/${queue}/pause`);
    await t.request("POST", `/v1/queues/${queue}/resume`);
    // Another queue's job is not this stream's.
    await t.request("POST", "/v1/queues/events-elsewhere/jobs", { name: "other" });

    const events = await watcher.atLeast(12);
    await watcher.close();
    expect(typesOf(events, cloudqId)).toEqual(["enqueued", "active", "completed"]);
    expect(typesOf(events, wqId)).toEqual(["enqueued", "active", "progress", "failed"]);
    expect(typesOf(events, "jid-1")).toEqual(["enqueued", "active", "retrying"]);
    expect(events.filter((e) => !e.data.jobId).map((e) => e.event)).toEqual(["paused", "resumed"]);
    expect(events.every((e) => e.data.queue === queue && e.data.backend === "main")).toBe(true);
    // An SSE id starts with the event's number in this process (`<number>.<gateway>`).
    const ids = events.map((e) => Number(e.id?.split(".")[0]));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(ids).toEqual(events.map((e) => e.data.id));
  });

  it("a subscriber that reconnects with Last-Event-ID gets what it missed, then what follows, nothing twice", async () => {
    const queue = "events-resume";
    const first = subscribe(`/v1/queues/${queue}/events`);
    await first.response;
    const a = (await t.request("POST", `/v1/queues/${queue}/jobs`, { name: "a" })).json.job.id;
    const [seen] = await first.atLeast(1);
    await first.close();

    const b = (await t.request("POST", `/v1/queues/${queue}/jobs`, { name: "b" })).json.job.id;
    await t.request("POST", `/v1/queues/${queue}/reserve`, { worker: "w" });

    const again = subscribe(`/v1/queues/${queue}/events`, { "last-event-id": seen!.id! });
    await again.response;
    const c = (await t.request("POST", `/v1/queues/${queue}/jobs`, { name: "c" })).json.job.id;
    const events = await again.atLeast(3);
    await again.close();
    expect(events.map((e) => [e.event, e.data.jobId])).toEqual([
      ["enqueued", b],
      ["active", a],
      ["enqueued", c],
    ]);
  });

  it("/v1/events streams every queue; a bad lastId or queue name is 400; a closed stream stops listening", async () => {
    const listeningBefore = t.gateway.events.listening;
    const all = subscribe("/v1/events");
    await all.response;
    await t.request("POST", "/v1/queues/events-any-1/jobs", { name: "x" });
    await t.request("POST", "/v1/queues/events-any-2/jobs", { name: "y" });
    const events = await all.atLeast(2);
    await all.close();
    expect(events.map((e) => e.data.queue)).toEqual(["events-any-1", "events-any-2"]);
    expect((await t.request("GET", "/v1/events?lastId=soon")).status).toBe(400);
    expect((await t.request("GET", "/v1/queues/%00/events")).status).toBe(400);
    // Every stream above was closed by its client: none is left listening (the gateway's own listeners stay).
    await until(() => t.gateway.events.listening === listeningBefore, "the closed streams to stop listening");
  });
});
