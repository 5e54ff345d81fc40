import { type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Backend } from "@switchyard/core";
import { HTTPException } from "hono/http-exception";
import type { GatewayEnv } from "../errors.js";
import { BACKEND_ERRORS, body, guarded, json } from "./declare.js";
import { asGlideJob } from "./glidemq-jobs.js";
import { extrasOf } from "./glidemq-native.js";
import * as S from "./glidemq-schemas.js";
import { Json } from "./native-schemas.js";

/*
 * glide-mq's suspended jobs: a processor's `job.suspend()` parks a job (state `suspended`) until a
 * signal resumes it. The proxy reads a suspension, lists the suspended jobs and sends signals; so does
 * this door, on a store in glide-mq's layout (GlideMqExtras), and answers 501 elsewhere.
 */

const Signal = z.object({ name: z.string(), data: Json, receivedAt: z.number() });
const Suspension = z
  .object({ reason: z.string().optional(), suspendedAt: z.number(), timeout: z.number().optional(), signals: z.array(Signal) })
  .openapi("GlideSuspension");
const SuspendedJobs = z.object({ jobs: z.array(S.GlideJob.extend({ suspend: Suspension })) });
const SuspendedQuery = S.ListQuery.omit({ state: true });
const SignalBody = z.object({
  name: z.string({ error: "Missing required field: name (string)" }).min(1, "Missing required field: name (string)"),
  data: Json.optional(),
});
const Resumed = z.object({ resumed: z.boolean() });
const ERRORS = S.glideErrors(...BACKEND_ERRORS);

export function mountSuspendRoutes(door: OpenAPIHono<GatewayEnv>, on: (queue: string) => Backend): void {
  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/jobs/{id}/suspend",
      summary: "Why and since when a job is suspended, with the signals it got (404 unless it is suspended)",
      request: { params: S.JobParams },
      responses: { 200: json("The suspension", Suspension), ...ERRORS },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const suspension = await extrasOf(on(queue), queue, "suspending a job").suspension(queue, id);
      if (!suspension) throw new HTTPException(404, { message: "Job is not suspended" });
      return c.json(suspension, 200);
    },
  );

  const signal = body(SignalBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/{id}/signal",
      summary: "Resume a suspended job with a named signal (and data); resumed false when it was not suspended",
      middleware: signal.middleware,
      request: { params: S.JobParams, body: signal.body },
      responses: { 200: json("Whether it resumed", Resumed), ...S.glideErrors(...BACKEND_ERRORS, 413) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const { name, data } = c.req.valid("json");
      const resumed = await extrasOf(on(queue), queue, "signalling a suspended job").signal(queue, id, name, data);
      return c.json({ resumed }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/suspended",
      summary: "The suspended jobs, soonest timeout first, each with its suspension",
      request: { params: S.QueueParams, query: SuspendedQuery },
      responses: { 200: json("The suspended jobs", SuspendedJobs), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const { start = 0, end = -1, excludeData = false } = c.req.valid("query");
      const store = extrasOf(on(queue), queue, "the suspended jobs");
      const jobs = await store.suspendedJobs(queue, start, end);
      const listed = await Promise.all(
        jobs.map(async (job) => ({
          ...asGlideJob(job, { excludeData, state: "suspended" }),
          suspend: await store.suspension(queue, job.id),
        })),
      );
      // A job resumed between the two reads is left out, as glide-mq's proxy leaves it out.
      return c.json({ jobs: listed.flatMap((job) => (job.suspend ? [{ ...job, suspend: job.suspend }] : [])) }, 200);
    },
  );
}
