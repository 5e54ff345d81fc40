import type { OpenAPIHono } from "@hono/zod-openapi";
import { type Backend, type Job, type JobState, NotFoundError, UnsupportedError, hasGlideMqQueues, hasJobEditing } from "@switchyard/core";
import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import type { GatewayEnv } from "../errors.js";
import type { JobEventType } from "../events.js";
import { clientGone, errorFormat, limitBody } from "../http.js";
import { BACKEND_ERRORS, body, declaredDoor, guarded, json } from "./declare.js";
import type { Door, DoorContext } from "./door.js";
import { streamEvents } from "./event-stream.js";
import { mountBroadcastRoutes } from "./glidemq-broadcast.js";
import { mountDeadLetterRoutes } from "./glidemq-dlq.js";
import { glideEventStream, glideFrame, jobOutputStream } from "./glidemq-events.js";
import { mountFlowRoutes } from "./glidemq-flows.js";
import { CORE_STATES_OF, asGlideJob, corePriority, glideCounts, toEnqueueInput } from "./glidemq-jobs.js";
import { extrasOf, mountGlideOnlyRoutes } from "./glidemq-native.js";
import * as S from "./glidemq-schemas.js";
import { mountSuspendRoutes } from "./glidemq-suspend.js";
import { mountUsageRoutes } from "./glidemq-usage.js";
import { mountWorkerRoutes } from "./glidemq-workers.js";
import { againAsNew } from "./native-actions.js";

/** How long `/jobs/wait` waits by default (glide-mq's addAndWait). */
const DEFAULT_WAIT_TIMEOUT_MS = 30_000;

const FINISHING: ReadonlySet<JobEventType> = new Set(["completed", "failed", "canceled"]);

const ERRORS = S.glideErrors(...BACKEND_ERRORS, 413);

/** A job of `queue`, or glide-mq's 404. */
async function jobOf(backend: Backend, queue: string, id: string): Promise<Job> {
  const job = await backend.get(queue, id);
  if (!job) throw new NotFoundError("Job not found");
  return job;
}

/** The jobs of glide-mq's list `state`, positions `start` to `end` (-1: the last), through the Backend contract. */
async function listThroughCore(backend: Backend, queue: string, state: string, start: number, end: number): Promise<Job[]> {
  const wanted = end === -1 ? Number.POSITIVE_INFINITY : end + 1;
  const jobs: Job[] = [];
  for (const coreState of CORE_STATES_OF[state] ?? []) {
    let cursor: string | undefined;
    do {
      const page = await backend.list(queue, { state: coreState as JobState, limit: 1000, ...(cursor ? { cursor } : {}) });
      jobs.push(...page.items);
      cursor = page.cursor ?? undefined;
    } while (cursor && jobs.length < wanted);
  }
  return jobs.slice(start, wanted);
}

function needEditing(backend: Backend, queue: string, what: string) {
  if (hasJobEditing(backend)) return backend;
  throw new UnsupportedError(
    `${what} needs glide-mq's queue administration or the editing capability; queue "${queue}" is on a ${backend.kind} backend, which has neither`,
  );
}

/**
 * The glide-mq door at `/glidemq`: glide-mq's HTTP proxy (`glide-mq/proxy`), its paths, bodies,
 * statuses and `{error}` bodies, on any backend; on a glide-mq store every answer is glide-mq's own
 * (the GlideMqQueues interface), elsewhere what the Backend contract can honour, and a 501 naming
 * what is missing. Beyond the proxy: worker routes to reserve, heartbeat, complete and fail jobs.
 */
export const glidemqDoor: Door = {
  name: "glidemq",
  mount(app, context) {
    const door = createGlidemqDoor(context);
    app.route("/glidemq", door);
    // At `/` through a plain Hono app: the same routes, described once (under /glidemq) in the document.
    if (context.config.doors.glidemq.mountAtRoot) app.route("/", new Hono<GatewayEnv>().route("/", door));
  },
};

function createGlidemqDoor({ router, backends, wakeups, events }: DoorContext): OpenAPIHono<GatewayEnv> {
  const door = declaredDoor((error) => S.describeGlideFailure(error));
  door.use("*", errorFormat("glidemq"), limitBody);
  // The proxy's health counts the queues it has opened; this door, the queues it has served.
  const served = new Set<string>();
  const on = (queue: string) => {
    const backend = router.backendFor(queue);
    served.add(queue);
    return backend;
  };
  const startedAt = Date.now();
  const read = (path: string, summary: string) => ({ method: "get" as const, path, summary });

  door.openapi(
    guarded("glidemq", "read", {
      ...read("/health", "The door is up: queues it has served and uptime, as glide-mq's proxy answers"),
      responses: { 200: json("Up", S.Health) },
    }),
    (c) => c.json({ queues: served.size, status: "ok" as const, uptime: Date.now() - startedAt }, 200),
  );

  const add = body(S.AddJobBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs",
      summary: "Add a job (glide-mq's Queue.add); 200 {skipped} when its jobId or deduplication id exists",
      middleware: add.middleware,
      request: { params: S.QueueParams, body: add.body },
      responses: { 201: json("Added", S.Added), 200: json("Skipped", S.Added), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const { job, created } = await on(queue).enqueue(queue, toEnqueueInput(c.req.valid("json")));
      return created ? c.json({ id: job.id, name: job.name, timestamp: job.createdAt }, 201) : c.json({ skipped: true as const }, 200);
    },
  );

  const bulk = body(S.BulkBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/bulk",
      summary: "Add up to 1,000 jobs, all or none; 201 when any was created",
      middleware: bulk.middleware,
      request: { params: S.QueueParams, body: bulk.body },
      responses: { 201: json("Added", S.BulkAdded), 200: json("All skipped", S.BulkAdded), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const { jobs } = c.req.valid("json");
      const results = jobs.length === 0 ? [] : await on(queue).enqueueBulk(queue, jobs.map(toEnqueueInput));
      const answers = results.map(({ job, created }) =>
        created ? { id: job.id, name: job.name, timestamp: job.createdAt } : { skipped: true as const },
      );
      return c.json({ jobs: answers }, results.some((r) => r.created) ? 201 : 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      ...read("/queues/{queue}/jobs", "The jobs in one of glide-mq's states, positions start..end"),
      request: { params: S.QueueParams, query: S.ListQuery },
      responses: { 200: json("The jobs", S.JobList), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const { state, start = 0, end = -1, excludeData = false } = c.req.valid("query");
      const backend = on(queue);
      const jobs = hasGlideMqQueues(backend)
        ? await backend.glideJobs(queue, state, start, end)
        : await listThroughCore(backend, queue, state, start, end);
      return c.json({ jobs: jobs.map((job) => asGlideJob(job, { excludeData, state })) }, 200);
    },
  );

  const wait = body(S.WaitJobBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/wait",
      summary: "Add a job and answer its return value once it completes (504 after waitTimeout ms, default 30 s)",
      middleware: wait.middleware,
      request: { params: S.QueueParams, body: wait.body },
      responses: { 200: json("The job's return value", S.WaitResult), ...S.glideErrors(...BACKEND_ERRORS, 413, 500, 504) },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const {
        opts: { waitTimeout, ...opts } = {},
        ...rest
      } = c.req.valid("json");
      if (opts.removeOnComplete || opts.removeOnFail)
        throw new HTTPException(400, { message: "waiting for a job needs it kept: removeOnComplete/removeOnFail cannot be set" });
      const backend = on(queue);
      const { job, created } = await backend.enqueue(queue, toEnqueueInput({ ...rest, opts }));
      if (!created) throw new HTTPException(400, { message: "cannot wait on a deduplicated or duplicate-id add that was skipped" });
      const timeout = waitTimeout ?? DEFAULT_WAIT_TIMEOUT_MS;
      const finished = async () => {
        const now = await backend.get(queue, job.id);
        return now && (now.state === "completed" || now.state === "failed" || now.state === "canceled") ? now : undefined;
      };
      // Looked at every longPollIntervalMs, and at once when this gateway sees the job finish.
      const unsubscribe = events.subscribe(
        (event) => {
          if (event.queue === queue && event.jobId === job.id && FINISHING.has(event.type)) wakeups.wake(queue);
        },
        [...FINISHING],
      );
      const done = await wakeups.reserveWaiting(queue, finished, timeout, clientGone(c)).finally(unsubscribe);
      if (!done) throw new HTTPException(504, { message: `Job ${job.id} did not finish within ${timeout}ms` });
      // glide-mq's addAndWait rejects with the failure, which its proxy answers as a 500.
      if (done.state !== "completed") throw new HTTPException(500, { message: done.error?.message ?? `Job ${job.id} failed` });
      return c.json({ result: done.result }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      ...read("/queues/{queue}/jobs/{id}", "One job, with its state"),
      request: { params: S.JobParams },
      responses: { 200: json("The job", S.GlideJob), ...ERRORS },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      return c.json(asGlideJob(await jobOf(on(queue), queue, id)), 200);
    },
  );

  const priority = body(S.PriorityBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/{id}/priority",
      summary: "Change a waiting or delayed job's priority (glide-mq's 0..2048)",
      middleware: priority.middleware,
      request: { params: S.JobParams, body: priority.body },
      responses: { 200: json("Changed", S.PriorityChanged), ...S.glideErrors(...BACKEND_ERRORS, 409, 413) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const { priority: value } = c.req.valid("json");
      const backend = on(queue);
      await jobOf(backend, queue, id);
      if (hasGlideMqQueues(backend)) await backend.changePriority(queue, id, value);
      else await needEditing(backend, queue, "changing a priority").setPriority(queue, id, corePriority(value));
      return c.json({ priority: value, updated: true as const }, 200);
    },
  );

  const delay = body(S.DelayBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/{id}/delay",
      summary: "Run a delayed job `delay` ms from now instead",
      middleware: delay.middleware,
      request: { params: S.JobParams, body: delay.body },
      responses: { 200: json("Changed", S.DelayChanged), ...S.glideErrors(...BACKEND_ERRORS, 409, 413) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const { delay: value } = c.req.valid("json");
      const backend = on(queue);
      const job = await jobOf(backend, queue, id);
      if (hasGlideMqQueues(backend)) await backend.changeDelay(queue, id, value);
      else await reschedule(backend, queue, job, Math.round(value), "changing a delay");
      return c.json({ delay: value, updated: true as const }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/{id}/promote",
      summary: "Make a delayed job waiting now",
      request: { params: S.JobParams },
      responses: { 200: json("Promoted", S.Promoted), ...S.glideErrors(...BACKEND_ERRORS, 409) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const backend = on(queue);
      const job = await jobOf(backend, queue, id);
      if (hasGlideMqQueues(backend)) await backend.promote(queue, id);
      else await reschedule(backend, queue, job, 0, "promoting a job");
      return c.json({ promoted: true as const }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/{id}/revoke",
      summary: "Revoke a job: a waiting or delayed one fails as revoked",
      request: { params: S.JobParams },
      responses: { 200: json("Revoked", S.Revoked), ...S.glideErrors(...BACKEND_ERRORS, 409) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      await on(queue).cancel(queue, id);
      return c.json({ status: "revoked" as const }, 200);
    },
  );

  for (const [path, paused] of [
    ["/queues/{queue}/pause", true],
    ["/queues/{queue}/resume", false],
  ] as const) {
    door.openapi(
      guarded("glidemq", "admin", {
        method: "post",
        path,
        summary: paused ? "Pause the queue" : "Resume the queue",
        request: { params: S.QueueParams },
        responses: { 200: json("Paused or not", S.Paused), ...ERRORS },
      }),
      async (c) => {
        const { queue } = c.req.valid("param");
        if (paused) await on(queue).pause(queue);
        else await on(queue).resume(queue);
        return c.json({ paused }, 200);
      },
    );
  }

  door.openapi(
    guarded("glidemq", "read", {
      ...read("/queues/{queue}/counts", "Jobs per state, as glide-mq counts them"),
      request: { params: S.QueueParams },
      responses: { 200: json("Counts", S.Counts), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const backend = on(queue);
      return c.json(hasGlideMqQueues(backend) ? await backend.glideCounts(queue) : glideCounts(await backend.counts(queue)), 200);
    },
  );

  door.openapi(
    guarded("glidemq", "admin", {
      method: "post",
      path: "/queues/{queue}/drain",
      summary: "Remove the waiting jobs (and the delayed ones with delayed=true)",
      request: { params: S.QueueParams, query: S.DrainQuery },
      responses: { 200: json("Drained", S.Drained), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const { delayed = false } = c.req.valid("query");
      const backend = on(queue);
      if (hasGlideMqQueues(backend)) await backend.drain(queue, delayed);
      else {
        // Elsewhere a drained job is withdrawn (canceled), which every store can do.
        for (const state of delayed ? (["waiting", "delayed"] as const) : (["waiting"] as const)) {
          for (const job of await listThroughCore(backend, queue, state, 0, -1)) await backend.cancel(queue, job.id).catch(ignoreGone);
        }
      }
      return c.json({ delayed, drained: true as const }, 200);
    },
  );

  const retry = body(S.RetryBody, true, "Bad request");
  door.openapi(
    guarded("glidemq", "admin", {
      method: "post",
      path: "/queues/{queue}/retry",
      summary: "Put failed jobs back to waiting (`count` of them, all by default)",
      middleware: retry.middleware,
      request: { params: S.QueueParams, query: S.RetryQuery, body: retry.body },
      responses: { 200: json("How many", S.Retried), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const count = c.req.valid("json").count ?? c.req.valid("query").count ?? 0;
      const backend = on(queue);
      if (hasGlideMqQueues(backend)) return c.json({ retried: await backend.retryFailed(queue, count) }, 200);
      const editing = needEditing(backend, queue, "retrying failed jobs");
      const failed = await listThroughCore(backend, queue, "failed", 0, count > 0 ? count - 1 : -1);
      for (const job of failed) await editing.replace(queue, job.id, againAsNew(job));
      return c.json({ retried: failed.length }, 200);
    },
  );

  const sse = { description: "Server-Sent Events", content: { "text/event-stream": { schema: S.EventText } } };
  door.openapi(
    guarded("glidemq", "read", {
      ...read("/queues/{queue}/events", "Every event of the queue as Server-Sent Events (Last-Event-ID or lastId replays)"),
      request: { params: S.QueueParams, query: S.EventsQuery },
      responses: { 200: sse, ...ERRORS },
    }),
    (c) => {
      const { queue } = c.req.valid("param");
      const backend = on(queue);
      if (hasGlideMqQueues(backend)) return glideEventStream(c, backend, queue, {}) as never;
      return streamEvents(c, events, (event) => event.queue === queue, { frame: glideFrame, greeting: "connected" }) as never;
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      ...read("/queues/{queue}/jobs/{id}/events", "One job's events as Server-Sent Events, until it completes or fails"),
      request: { params: S.JobParams, query: S.EventsQuery },
      responses: { 200: sse, ...ERRORS },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const backend = on(queue);
      await jobOf(backend, queue, id);
      if (hasGlideMqQueues(backend)) return glideEventStream(c, backend, queue, { jobId: id }) as never;
      return streamEvents(c, events, (event) => event.queue === queue && event.jobId === id, {
        frame: glideFrame,
        greeting: "connected",
        endsAfter: (event) => FINISHING.has(event.type),
      }) as never;
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      ...read(
        "/queues/{queue}/jobs/{id}/stream",
        "A job's output (job.stream() entries) as Server-Sent Events, until it completes or fails",
      ),
      request: { params: S.JobParams, query: S.EventsQuery },
      responses: { 200: sse, ...ERRORS },
    }),
    (c) => {
      const { queue, id } = c.req.valid("param");
      return jobOutputStream(c, extrasOf(on(queue), queue, "a job's output stream"), queue, id) as never;
    },
  );

  mountWorkerRoutes(door, on, wakeups);
  mountGlideOnlyRoutes(door, on);
  mountDeadLetterRoutes(door, on);
  mountFlowRoutes(door, on, backends);
  mountSuspendRoutes(door, on);
  mountUsageRoutes(door, on, backends);
  mountBroadcastRoutes(door, on);
  return door;
}

/** Where the store cannot move a delayed job, it is put again with its new delay (JobEditing.replace). */
async function reschedule(backend: Backend, queue: string, job: Job, delay: number, what: string): Promise<void> {
  if (job.state !== "delayed") throw new HTTPException(400, { message: `Job ${job.id} is not delayed` });
  await needEditing(backend, queue, what).replace(queue, job.id, { ...againAsNew(job), ...(delay > 0 ? { delay } : {}) });
}

/** A job another caller finished or withdrew between the listing and the cancel is left as it is. */
function ignoreGone(error: unknown): void {
  if (error instanceof Error && (error.name === "NotFoundError" || error.name === "InvalidStateError")) return;
  throw error;
}
