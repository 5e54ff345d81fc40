import { randomUUID } from "node:crypto";
import type { Capabilities } from "@switchyard/core";
import { type Gateway, createGateway } from "@switchyard/gateway";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreName, type StoreUnderTest, openStore } from "./matrix-backends.js";

/**
 * The door x backend matrix: the same requests through the Cloudq, Worker Queue and native /v1 doors must
 * behave alike on every backend the gateway routes to, and leave the job in that backend's native
 * layout (probed directly). Redis: qless on database 7, glide-mq on database 8 and on the cluster; Cloudq on a MongoDB
 * database of its own.
 */
const STORES: Array<{ name: StoreName; redisDb?: number }> = [
  { name: "sqlite" },
  { name: "postgres" },
  { name: "mysql" },
  { name: "qless", redisDb: 7 },
  { name: "glidemq", redisDb: 8 },
  { name: "glidemq-cluster" },
  { name: "cloudq" },
];

// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field with expect().
type Reply = { status: number; json: any };

for (const { name, redisDb } of STORES) {
  describe(`gateway doors over ${name}`, () => {
    const store: StoreUnderTest = openStore(name, redisDb);
    let gateway: Gateway;
    let capabilities: Capabilities;

    beforeAll(async () => {
      gateway = await createGateway({ config: { backends: { main: store.spec }, routes: [{ pattern: "*", backend: "main" }] }, env: {} });
      capabilities = gateway.backends.get("main")!.backend.capabilities;
    });
    afterAll(async () => {
      await gateway?.close();
      await store.dispose();
    });

    const newQueue = () => store.track(`mx-${randomUUID().slice(0, 8)}`);
    const call = async (method: string, path: string, body?: unknown): Promise<Reply> => {
      const init: RequestInit = { method };
      if (body !== undefined) init.body = JSON.stringify(body);
      if (body !== undefined) init.headers = { "content-type": "application/json" };
      const res = await gateway.app.request(path, init);
      const text = await res.text();
      return { status: res.status, json: text === "" ? undefined : JSON.parse(text) };
    };
    const expectNative = async (queue: string, id: string, state: keyof StoreUnderTest["nativeStates"]) => {
      expect(store.nativeStates[state]).toContain(await store.nativeState(queue, id));
    };

    it("the Cloudq seed sequence: publish answers success, GET hands out klass/args/id at the top level, DELETE finishes it, then GET is empty", async () => {
      const queue = newQueue();
      const published = await call("POST", `/cloudq/${queue}`, { job: { klass: "Archive", args: [{ data: "foobar" }] } });
      expect(published).toEqual({ status: 200, json: { status: "success" } });
      const reserved = await call("GET", `/cloudq/${queue}`);
      expect(reserved.status).toBe(200);
      expect(reserved.json).toMatchObject({ klass: "Archive", args: [{ data: "foobar" }], id: expect.any(String) });
      const id: string = reserved.json.id;
      await expectNative(queue, id, "active");
      expect(await call("DELETE", `/cloudq/${queue}/${id}`)).toEqual({ status: 200, json: { status: "success" } });
      expect(await call("GET", `/cloudq/${queue}`)).toEqual({ status: 200, json: { status: "empty" } });
      await expectNative(queue, id, "completed");
    });

    it("the /v1 lifecycle: enqueue, reserve with a lease, heartbeat, fail with retry, reserve again, complete, counts and list agree", async () => {
      const queue = newQueue();
      const enqueued = await call("POST", `/v1/queues/${queue}/jobs`, { name: "resize", data: { w: 64 }, maxAttempts: 3, priority: 5 });
      expect(enqueued.status).toBe(201);
      const id: string = enqueued.json.job.id;
      await expectNative(queue, id, "waiting");

      const first = await call("POST", `/v1/queues/${queue}/reserve`, { worker: "w1", leaseMs: 30_000 });
      expect(first.json.jobs).toMatchObject([
        { id, name: "resize", data: { w: 64 }, state: "active", attempts: 1, lease: { worker: "w1" } },
      ]);
      await expectNative(queue, id, "active");
      const beat = await call("POST", `/v1/queues/${queue}/jobs/${id}/heartbeat`, { worker: "w1", leaseMs: 60_000 });
      expect(beat.status).toBe(200);
      expect(beat.json.job.lease.expiresAt).toBeGreaterThan(first.json.jobs[0].lease.expiresAt);
      expect((await call("POST", `/v1/queues/${queue}/jobs/${id}/heartbeat`, { worker: "intruder" })).status).toBe(409);

      const failed = await call("POST", `/v1/queues/${queue}/jobs/${id}/fail`, { worker: "w1", error: { message: "boom" }, retryDelay: 0 });
      expect(failed.status).toBe(200);
      expect(["waiting", "delayed"]).toContain(failed.json.job.state);
      const second = await call("POST", `/v1/queues/${queue}/reserve`, { worker: "w2" });
      expect(second.json.jobs).toMatchObject([{ id, attempts: 2 }]);
      const done = await call("POST", `/v1/queues/${queue}/jobs/${id}/complete`, { worker: "w2", result: { ok: true } });
      expect(done.json.job).toMatchObject({ id, state: "completed" });
      await expectNative(queue, id, "completed");

      const counts = await call("GET", `/v1/queues/${queue}/counts`);
      expect(counts.json.counts).toMatchObject({ waiting: 0, delayed: 0, active: 0, completed: capabilities.keepsCompleted ? 1 : 0 });
      const listed = await call("GET", `/v1/queues/${queue}/jobs?state=completed`);
      expect(listed.json.jobs.map((job: { id: string }) => job.id)).toEqual(capabilities.keepsCompleted ? [id] : []);
    });

    it("the Worker Queue door: a job created with a taskable reads back as its legacy row through reserve, progress and complete", async () => {
      const queue = newQueue();
      const created = await call("POST", "/workerqueue/jobs", {
        name: "magick",
        data: { rows: 64 },
        taskable_type: "Photo",
        taskable_id: 7,
        queue,
      });
      expect(created.status).toBe(201);
      const id: string = created.json.job.id;
      expect(created.json.job).toMatchObject({
        queue,
        name: "magick",
        data: { rows: 64 },
        status: "pending",
        taskable_type: "Photo",
        taskable_id: 7,
      });
      await expectNative(queue, id, "waiting");

      const reserved = await call("POST", "/workerqueue/reserve", { worker: "wq-1", queue });
      expect(reserved.json.jobs).toMatchObject([{ id, status: "processing", locked_by: "wq-1", attempts: 1 }]);
      await expectNative(queue, id, "active");
      await call("POST", `/workerqueue/jobs/${id}/progress`, { worker: "wq-1", queue, progress: { percent: 50 } });
      const polled = await call("GET", `/workerqueue/jobs/${id}/progress?queue=${queue}`);
      expect(polled.json).toEqual({ id, status: "processing", progress: { percent: 50 }, finished: false });

      const done = await call("POST", `/workerqueue/jobs/${id}/complete`, { worker: "wq-1", queue });
      expect(done.json.job).toMatchObject({ id, status: "complete", locked_by: null, taskable_type: "Photo", taskable_id: 7 });
      await expectNative(queue, id, "completed");
      const after = await call("GET", `/workerqueue/jobs/${id}?queue=${queue}`);
      if (capabilities.keepsCompleted) expect(after.json.job.status).toBe("complete");
      else expect(after.status).toBe(404);
    });

    it("the Worker Queue door's error is final, with its details, on every backend", async () => {
      const queue = newQueue();
      const { id } = (await call("POST", "/workerqueue/jobs", { name: "run", queue })).json.job;
      await call("POST", "/workerqueue/reserve", { worker: "w", queue });
      const failed = await call("POST", `/workerqueue/jobs/${id}/error`, { worker: "w", queue, details: "exit 3" });
      expect(failed.json.job).toMatchObject({ id, status: "error", details: "exit 3" });
      await expectNative(queue, id, "failed");
      expect((await call("POST", "/workerqueue/jobs", { name: "", queue })).status).toBe(400);
    });

    it("the event stream shows each job's lifecycle through the doors, in order", async () => {
      const queue = newQueue();
      const res = await gateway.app.request(`/v1/queues/${queue}/events`);
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      const published = await call("POST", `/cloudq/${queue}`, { job: { klass: "Tick", args: [] } });
      expect(published.status).toBe(200);
      const reserved = await call("GET", `/cloudq/${queue}`);
      await call("DELETE", `/cloudq/${queue}/${reserved.json.id}`);
      while ((text.match(/^event: /gm) ?? []).length < 3) text += decoder.decode((await reader.read()).value, { stream: true });
      await reader.cancel();
      expect([...text.matchAll(/^event: (\w+)$/gm)].map((match) => match[1])).toEqual(["enqueued", "active", "completed"]);
      expect(text).toContain(`"jobId":"${reserved.json.id}"`);
    });

    it("jobs enqueued for later or failed for good are stored in the native delayed and failed states", async () => {
      const queue = newQueue();
      const later = await call("POST", `/v1/queues/${queue}/jobs`, { name: "later", delay: 60_000 });
      expect(later.json.job.state).toBe("delayed");
      await expectNative(queue, later.json.job.id, "delayed");
      const doomed = await call("POST", `/v1/queues/${queue}/jobs`, { name: "doomed" });
      const [reserved] = (await call("POST", `/v1/queues/${queue}/reserve`, { worker: "w" })).json.jobs;
      expect(reserved.id).toBe(doomed.json.job.id);
      const failed = await call("POST", `/v1/queues/${queue}/jobs/${reserved.id}/fail`, {
        worker: "w",
        error: { message: "no" },
        retry: false,
      });
      expect(failed.json.job).toMatchObject({ state: "failed", error: { message: "no" } });
      await expectNative(queue, reserved.id, "failed");
    });

    it("a job published through the Cloudq door is reserved through /v1, and a /v1 job is handed out by the Cloudq door", async () => {
      const queue = newQueue();
      await call("POST", `/cloudq/${queue}`, { job: { klass: "Mailer", args: ["a@example.org", 2] } });
      const [fromCloudq] = (await call("POST", `/v1/queues/${queue}/reserve`, { worker: "w" })).json.jobs;
      expect(fromCloudq).toMatchObject({ name: "Mailer", data: ["a@example.org", 2], state: "active" });
      expect((await call("POST", `/v1/queues/${queue}/jobs/${fromCloudq.id}/complete`, { worker: "w" })).status).toBe(200);

      const enqueued = await call("POST", `/v1/queues/${queue}/jobs`, { name: "Report", data: { month: 11 } });
      const reserved = await call("GET", `/cloudq/${queue}`);
      expect(reserved.json).toMatchObject({ klass: "Report", args: [{ month: 11 }], id: enqueued.json.job.id });
      await call("DELETE", `/cloudq/${queue}/${reserved.json.id}`);
      const after = await call("GET", `/v1/queues/${queue}/jobs/${reserved.json.id}`);
      if (capabilities.keepsCompleted) expect(after.json.job.state).toBe("completed");
      else expect(after.status).toBe(404);
    });

    it("bad input through either door answers 400 and leaves nothing in the store", async () => {
      const queue = newQueue();
      expect(await call("POST", `/cloudq/${queue}`, { job: { args: [1] } })).toEqual({
        status: 400,
        json: { status: "error", message: "klass key required" },
      });
      expect((await call("POST", `/cloudq/${queue}`, { job: { klass: "K" } })).status).toBe(400);
      expect((await call("POST", `/v1/queues/${queue}/jobs`, { data: 1 })).status).toBe(400);
      const bulk = await call("POST", `/v1/queues/${queue}/jobs/bulk`, { jobs: [{ name: "fine" }, { name: "bad", maxAttempts: -1 }] });
      expect(bulk.status).toBe(400);
      expect(await store.countJobs(queue)).toBe(0);
      expect(Object.values((await call("GET", `/v1/queues/${queue}/counts`)).json.counts).every((n) => n === 0)).toBe(true);
    });

    it("dependencies are honoured where the backend declares them, else refused with 501 and the reason, writing nothing", async () => {
      const queue = newQueue();
      const parent = (await call("POST", `/v1/queues/${queue}/jobs`, { name: "parent" })).json.job;
      const child = await call("POST", `/v1/queues/${queue}/jobs`, { name: "child", dependsOn: [parent.id] });
      if (capabilities.dependencies) {
        expect(child.status).toBe(201);
        expect(child.json.job.state).toBe("blocked");
        await expectNative(queue, child.json.job.id, "blocked");
      } else {
        expect(child.status).toBe(501);
        expect(child.json.error).toMatchObject({ code: "UNSUPPORTED", message: expect.stringMatching(/depend/) });
        expect(await store.countJobs(queue)).toBe(1);
      }
    });

    it("tags are kept where the backend declares them, else refused with 501 and the reason, writing nothing", async () => {
      const queue = newQueue();
      const tagged = await call("POST", `/v1/queues/${queue}/jobs`, { name: "tagged", tags: ["billing"] });
      if (capabilities.tags) {
        expect(tagged.status).toBe(201);
        expect((await call("GET", `/v1/queues/${queue}/jobs/${tagged.json.job.id}`)).json.job.tags).toEqual(["billing"]);
      } else {
        expect(tagged.status).toBe(501);
        expect(tagged.json.error).toMatchObject({ code: "UNSUPPORTED", message: expect.stringMatching(/tag/) });
        expect(await store.countJobs(queue)).toBe(0);
      }
    });
  });
}
