import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Backend } from "@switchyard/core";
import type { GatewayEnv } from "../errors.js";
import { clientGone } from "../http.js";
import type { Wakeups } from "../wakeups.js";
import { BACKEND_ERRORS, body, guarded, json } from "./declare.js";
import { asGlideJob } from "./glidemq-jobs.js";
import * as S from "./glidemq-schemas.js";

/** glide-mq's default lock duration: how long a job reserved here is held without a heartbeat. */
const DEFAULT_LOCK_MS = 30_000;

/**
 * What glide-mq's proxy never had: HTTP workers. Reserve takes jobs under a lease (`lockDuration`,
 * glide-mq's word), optionally waiting for one; heartbeat extends it; complete and fail end the run,
 * fail retrying by the job's attempts and backoff. On a glide-mq store a job reserved here is active
 * to glide-mq's tools, and is reclaimed as stalled if its lease lapses.
 */
export function mountWorkerRoutes(door: OpenAPIHono<GatewayEnv>, on: (queue: string) => Backend, wakeups: Wakeups): void {
  const reserve = body(S.ReserveBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/reserve",
      summary: "Take up to `count` jobs for `worker` under a lease, waiting up to `wait` ms for one (not in glide-mq's proxy)",
      middleware: reserve.middleware,
      request: { params: S.QueueParams, body: reserve.body },
      responses: {
        200: json("The jobs taken, now active (none if the wait ran out)", S.JobsResponse),
        ...S.glideErrors(...BACKEND_ERRORS, 413),
      },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const { worker, count, lockDuration, wait } = c.req.valid("json");
      const backend = on(queue);
      const take = async () => {
        const jobs = await backend.reserve(queue, { worker, count: count ?? 1, leaseMs: lockDuration ?? DEFAULT_LOCK_MS });
        return jobs.length > 0 ? jobs : undefined;
      };
      const jobs = (await wakeups.reserveWaiting(queue, take, wait ?? 0, clientGone(c))) ?? [];
      return c.json({ jobs: jobs.map((job) => asGlideJob(job)) }, 200);
    },
  );

  const heartbeat = body(S.HeartbeatBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/{id}/heartbeat",
      summary: "Extend the lease of a job this worker holds, and record its progress",
      middleware: heartbeat.middleware,
      request: { params: S.JobParams, body: heartbeat.body },
      responses: { 200: json("The job", S.GlideJob), ...S.glideErrors(...BACKEND_ERRORS, 409, 413) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const { worker, lockDuration, progress } = c.req.valid("json");
      const job = await on(queue).heartbeat(queue, id, {
        worker,
        leaseMs: lockDuration ?? DEFAULT_LOCK_MS,
        ...(progress !== undefined ? { progress } : {}),
      });
      return c.json(asGlideJob(job), 200);
    },
  );

  const complete = body(S.CompleteBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/{id}/complete",
      summary: "Complete a job this worker holds, with its return value",
      middleware: complete.middleware,
      request: { params: S.JobParams, body: complete.body },
      responses: { 200: json("The job", S.GlideJob), ...S.glideErrors(...BACKEND_ERRORS, 409, 413) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const { worker, returnvalue } = c.req.valid("json");
      return c.json(asGlideJob(await on(queue).complete(queue, id, { worker, result: returnvalue ?? null })), 200);
    },
  );

  const fail = body(S.FailBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/{id}/fail",
      summary: "Fail a job this worker holds: retried by its attempts and backoff unless retry is false",
      middleware: fail.middleware,
      request: { params: S.JobParams, body: fail.body },
      responses: { 200: json("The job: failed, or waiting or delayed again", S.GlideJob), ...S.glideErrors(...BACKEND_ERRORS, 409, 413) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const { worker, failedReason, retry } = c.req.valid("json");
      const job = await on(queue).fail(queue, id, { worker, error: { message: failedReason }, retry: retry ?? true });
      return c.json(asGlideJob(job), 200);
    },
  );
}
