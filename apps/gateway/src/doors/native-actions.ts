import { type OpenAPIHono, z } from "@hono/zod-openapi";
import {
  type Backend,
  InvalidStateError,
  type Job,
  type JobState,
  NotFoundError,
  PrioritySchema,
  UnsupportedError,
  hasGlideMqQueues,
  hasJobEditing,
  hasQlessCommands,
} from "@switchyard/core";
import type { GatewayEnv } from "../errors.js";
import type { QueueRouter } from "../router.js";
import { BACKEND_ERRORS, body, errors, guarded, json } from "./declare.js";
import * as S from "./native-schemas.js";

/*
 * The /v1 routes that change a job or a queue beyond the Backend contract's own operations: retry a
 * failed job, promote a delayed one, change a priority, drain a queue. Each is done the way the
 * queue's store can (glide-mq's queue administration, qless's own commands, or core's JobEditing);
 * a store with none of those answers 501 naming its backend. Access: changing one job is `write`
 * (it is what a producer or worker does to its jobs); draining a queue is `admin`, as pausing is.
 */

/** Which of these actions a backend can perform: for the dashboard, which shows only those buttons. */
export interface JobActions {
  retry: boolean;
  promote: boolean;
  priority: boolean;
}

const editable = (backend: Backend) => hasJobEditing(backend) && backend.capabilities.editing;

export function supportedActions(backend: Backend): JobActions {
  const qless = hasQlessCommands(backend);
  // glide-mq retries failed jobs only in bulk (Queue.retryJobs), so one job cannot be picked there.
  return {
    retry: editable(backend) || qless,
    promote: backend.capabilities.delays && (hasGlideMqQueues(backend) || editable(backend) || qless),
    priority: backend.capabilities.priorities && (hasGlideMqQueues(backend) || editable(backend) || qless),
  };
}

function unsupported(backend: Backend, queue: string, what: string): never {
  throw new UnsupportedError(
    `${what} is not possible on queue "${queue}": it is on a ${backend.kind} backend, which cannot change a job that way`,
  );
}

async function jobOf(backend: Backend, queue: string, id: string): Promise<Job> {
  const job = await backend.get(queue, id);
  if (!job) throw new NotFoundError(`no job "${id}" in queue "${queue}"`);
  return job;
}

function expectState(job: Job, states: readonly JobState[], what: string): void {
  if (!states.includes(job.state))
    throw new InvalidStateError(`job "${job.id}" is ${job.state}; only a ${states.join(" or ")} job can be ${what}`);
}

/** The job put again from the start: its name, data and options, none of its runs. */
export function againAsNew(job: Job) {
  return {
    name: job.name,
    data: job.data,
    priority: job.priority,
    maxAttempts: job.maxAttempts,
    backoff: job.backoff,
    tags: job.tags,
    native: job.native,
  };
}

/** qless re-puts a jid as new when it is put again; options it is not given keep their values. */
async function qlessPut(backend: Backend, queue: string, job: Job): Promise<void> {
  if (!hasQlessCommands(backend)) return;
  await backend.qless("put", Date.now() / 1000, "", queue, job.id, job.name, JSON.stringify(job.data), 0);
}

/** Core's priority on glide-mq's scale, as glidemq-valkey maps it: 1..2048 run first (1 soonest), 0 after them. */
const glidePriority = (priority: number) => (priority <= 0 ? 0 : 2049 - Math.min(priority, 2048));

/** Makes a failed (or canceled) job waiting again, with its attempts counted from zero. */
async function retry(backend: Backend, queue: string, job: Job): Promise<void> {
  expectState(job, ["failed", "canceled"], "retried");
  if (editable(backend) && hasJobEditing(backend)) await backend.replace(queue, job.id, againAsNew(job));
  else if (hasQlessCommands(backend)) await qlessPut(backend, queue, job);
  else unsupported(backend, queue, "retrying one job");
}

/** Makes a delayed job due now. */
async function promote(backend: Backend, queue: string, job: Job): Promise<void> {
  expectState(job, ["delayed"], "promoted");
  if (hasGlideMqQueues(backend)) await backend.promote(queue, job.id);
  else if (editable(backend) && hasJobEditing(backend)) await backend.replace(queue, job.id, againAsNew(job));
  else if (hasQlessCommands(backend)) await qlessPut(backend, queue, job);
  else unsupported(backend, queue, "promoting a job");
}

async function setPriority(backend: Backend, queue: string, job: Job, priority: number): Promise<void> {
  expectState(job, ["waiting", "delayed", "blocked"], "given a new priority");
  if (!backend.capabilities.priorities) unsupported(backend, queue, "changing a priority");
  if (hasGlideMqQueues(backend)) await backend.changePriority(queue, job.id, glidePriority(priority));
  else if (editable(backend) && hasJobEditing(backend)) await backend.setPriority(queue, job.id, priority);
  else if (hasQlessCommands(backend)) await backend.qless("priority", Date.now() / 1000, job.id, priority);
  else unsupported(backend, queue, "changing a priority");
}

/** Withdraws the waiting jobs (and the delayed ones when asked); answers how many. */
async function drain(backend: Backend, queue: string, delayed: boolean): Promise<number> {
  if (hasGlideMqQueues(backend)) return backend.drain(queue, delayed);
  // Elsewhere each job is canceled, which every store can do; one a worker took meanwhile is left to it.
  let drained = 0;
  for (const state of delayed ? (["waiting", "delayed"] as const) : (["waiting"] as const)) {
    // What is there now: jobs a producer adds while the drain runs are not chased forever.
    let left = (await backend.counts(queue))[state];
    while (left > 0) {
      const page = await backend.list(queue, { state, limit: 500 });
      if (page.items.length === 0) break;
      let canceled = 0;
      for (const job of page.items) {
        try {
          await backend.cancel(queue, job.id);
          canceled++;
        } catch (error) {
          if (!(error instanceof NotFoundError || error instanceof InvalidStateError)) throw error;
        }
      }
      drained += canceled;
      left -= page.items.length;
      // A page whose jobs all moved on by themselves: what is listed now is newer than the drain.
      if (canceled === 0) break;
    }
  }
  return drained;
}

const PriorityBody = z
  .strictObject({ priority: PrioritySchema.describe("The new priority; larger runs sooner (the core scale).") })
  .openapi("PriorityBody");
const DrainQuery = z.object({
  delayed: z
    .enum(["true", "false"], { message: "delayed must be true or false" })
    .optional()
    .describe("Also withdraw the delayed jobs; default false."),
});
const DrainedResponse = z.object({ queue: z.string(), drained: z.number().int() }).openapi("DrainedResponse");

/** Registers the routes on the /v1 door (see native.ts). */
export function mountNativeActions(door: OpenAPIHono<GatewayEnv>, router: QueueRouter): void {
  const on = (queue: string) => router.backendFor(queue);
  const jobActions = [
    { action: "retry", summary: "Run a failed or canceled job again from the start (attempts from zero)", run: retry },
    { action: "promote", summary: "Make a delayed job due now", run: promote },
  ] as const;
  for (const { action, summary, run } of jobActions) {
    door.openapi(
      guarded("native", "write", {
        method: "post",
        path: `/queues/{queue}/jobs/{id}/${action}`,
        summary,
        request: { params: S.JobParams },
        responses: { 200: json("The job afterwards", S.JobResponse), ...errors(...BACKEND_ERRORS, 409) },
      }),
      async (c) => {
        const { queue, id } = c.req.valid("param");
        const backend = on(queue);
        await run(backend, queue, await jobOf(backend, queue, id));
        return c.json({ job: await jobOf(backend, queue, id) }, 200);
      },
    );
  }

  const priority = body(PriorityBody);
  door.openapi(
    guarded("native", "write", {
      method: "post",
      path: "/queues/{queue}/jobs/{id}/priority",
      summary: "Change the priority of a job that has not started; its place in the claim order follows",
      middleware: priority.middleware,
      request: { params: S.JobParams, body: priority.body },
      responses: { 200: json("The job afterwards", S.JobResponse), ...errors(...BACKEND_ERRORS, 409, 413) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const backend = on(queue);
      await setPriority(backend, queue, await jobOf(backend, queue, id), c.req.valid("json").priority);
      return c.json({ job: await jobOf(backend, queue, id) }, 200);
    },
  );

  door.openapi(
    guarded("native", "admin", {
      method: "post",
      path: "/queues/{queue}/drain",
      summary: "Withdraw every waiting job of a queue (and the delayed ones with delayed=true); active jobs are left to their workers",
      request: { params: S.QueueParams, query: DrainQuery },
      responses: { 200: json("How many jobs were withdrawn", DrainedResponse), ...errors(...BACKEND_ERRORS) },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const drained = await drain(on(queue), queue, c.req.valid("query").delayed === "true");
      return c.json({ queue, drained }, 200);
    },
  );
}
