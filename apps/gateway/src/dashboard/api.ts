import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { type Backend, JobStateSchema, emptyCounts } from "@switchyard/core";
import { ACCESS_LEVELS, allowsQueue } from "../auth.js";
import type { NamedBackend } from "../backends.js";
import type { Config } from "../config.js";
import { declaredDoor, errors, guarded, json } from "../doors/declare.js";
import { supportedActions } from "../doors/native-actions.js";
import * as S from "../doors/native-schemas.js";
import type { GatewayEnv } from "../errors.js";
import { errorFormat } from "../http.js";
import { COST_SHARE, LARGE_QUEUE_JOBS, type QueueCounts } from "../queue-counts.js";
import type { QueueRouter } from "../router.js";
import { THROUGHPUT_MINUTES, type Throughput } from "./throughput.js";

/*
 * The /v1 routes the dashboard reads besides the door's own: who the token is (to show only the
 * buttons it may use), every queue with its backend's type, counts and pause state in one call, and
 * the per-minute throughput. They are part of the REST API like any other, in /openapi.json.
 */

const Counts = z.record(JobStateSchema, z.number().int());
const Actions = z
  .object({ retry: z.boolean(), promote: z.boolean(), priority: z.boolean() })
  .describe("The job actions of /v1 this backend can perform (the others answer 501).");

const WhoAmIResponse = z
  .object({
    authEnabled: z.boolean().describe("false when no token is configured: every request is allowed."),
    name: z.string().nullable(),
    access: z.enum(ACCESS_LEVELS),
    doors: z.array(z.string()).nullable().describe("The doors the token may use; null: all."),
    queues: z.array(z.string()).nullable().describe("The queue-name patterns the token may touch; null: all."),
  })
  .openapi("WhoAmIResponse");

const QueueSummary = z
  .object({
    name: z.string(),
    backend: z.string(),
    type: z.string().describe("The backend's adapter type (workerqueue-sql, qless-redis...)."),
    paused: z.boolean().nullable(),
    counts: Counts.describe(
      `Jobs by state; a queue of ${LARGE_QUEUE_JOBS.toLocaleString("en")} jobs or more is counted again once its last count is older than ${COST_SHARE} times what that count took (GET /v1/queues/{queue}/counts counts at once).`,
    ),
    error: z.string().optional().describe("Why the counts could not be read; they are zeros then."),
  })
  .openapi("QueueSummary");

const OverviewResponse = z
  .object({
    backends: z.array(
      z.object({
        name: z.string(),
        type: z.string(),
        actions: Actions,
        error: z.string().optional().describe("Why its queues could not be listed."),
      }),
    ),
    queues: z.array(QueueSummary),
  })
  .openapi("OverviewResponse");

const ThroughputResponse = z
  .object({
    queue: z.string(),
    minutes: z
      .array(
        z.object({
          at: z.number().int().describe("Start of the minute, epoch ms."),
          completed: z.number().int(),
          failed: z.number().int(),
        }),
      )
      .describe(`The last ${THROUGHPUT_MINUTES} minutes, oldest first.`),
  })
  .openapi("ThroughputResponse");

async function summarize(queueCounts: QueueCounts, named: NamedBackend, queue: string): Promise<z.infer<typeof QueueSummary>> {
  const base = { name: queue, backend: named.name, type: named.spec.type };
  try {
    const [counts, paused] = await Promise.all([queueCounts.read(named, queue), pausedOf(named.backend, queue)]);
    return { ...base, counts, paused };
  } catch (error) {
    return { ...base, counts: emptyCounts(), paused: null, error: (error as Error).message };
  }
}

/** null where the store has no pause (the backend would refuse). */
const pausedOf = (backend: Backend, queue: string) => (backend.capabilities.pause ? backend.isPaused(queue) : Promise.resolve(null));

export interface DashboardApiContext {
  router: QueueRouter;
  backends: Map<string, NamedBackend>;
  config: Config;
  throughput: Throughput;
  queueCounts: QueueCounts;
}

export function mountDashboardApi(
  app: OpenAPIHono<GatewayEnv>,
  { router, backends, config, throughput, queueCounts }: DashboardApiContext,
): void {
  const door = declaredDoor();
  door.use("*", errorFormat("native"));

  door.openapi(
    // `read`, like the rest of /v1: a metrics token (a scraper's) has nothing to see in the dashboard.
    guarded("native", "read", {
      method: "get",
      path: "/whoami",
      summary: "The request's token: its name, access level, doors and queue patterns (admin when no token is configured)",
      responses: { 200: json("Who the token is", WhoAmIResponse) },
    }),
    (c) => {
      const principal = c.get("principal");
      if (!c.get("authEnabled") || !principal)
        return c.json({ authEnabled: false, name: null, access: "admin" as const, doors: null, queues: null }, 200);
      // The patterns as configured, not as compiled.
      const token = config.auth.tokens.find((candidate) => candidate.name === principal.name);
      return c.json(
        {
          authEnabled: true,
          name: principal.name,
          access: principal.access,
          doors: principal.doors ? [...principal.doors] : null,
          queues: token?.queues ?? null,
        },
        200,
      );
    },
  );

  door.openapi(
    guarded("native", "read", {
      method: "get",
      path: "/overview",
      summary: "Every backend with its type and job actions, and every queue the token may see with its counts and pause state",
      responses: { 200: json("Backends and queues; a backend that cannot be read says why", OverviewResponse) },
    }),
    async (c) => {
      const listed = await Promise.all(
        [...backends.values()].map(async (named) => {
          const entry = { name: named.name, type: named.spec.type, actions: supportedActions(named.backend) };
          try {
            // Only the queues the routes send to this backend, as GET /v1/queues lists them.
            const names = (await named.backend.queues()).filter((queue) => safeResolve(router, queue) === named && allowsQueue(c, queue));
            return { entry, queues: await Promise.all(names.map((queue) => summarize(queueCounts, named, queue))) };
          } catch (error) {
            return { entry: { ...entry, error: (error as Error).message }, queues: [] };
          }
        }),
      );
      const queues = listed.flatMap(({ queues }) => queues).sort((a, b) => a.name.localeCompare(b.name));
      return c.json({ backends: listed.map(({ entry }) => entry), queues }, 200);
    },
  );

  door.openapi(
    guarded("native", "read", {
      method: "get",
      path: "/queues/{queue}/overview",
      summary: "One queue's backend type, counts and pause state, and the job actions its backend can perform",
      request: { params: S.QueueParams },
      responses: { 200: json("The queue", QueueSummary.extend({ actions: Actions })), ...errors(400, 404) },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const named = router.resolve(queue);
      return c.json({ ...(await summarize(queueCounts, named, queue)), actions: supportedActions(named.backend) }, 200);
    },
  );

  door.openapi(
    guarded("native", "read", {
      method: "get",
      path: "/queues/{queue}/throughput",
      summary: `Jobs completed and failed per minute over the last ${THROUGHPUT_MINUTES} minutes, as this gateway process saw them`,
      request: { params: S.QueueParams },
      responses: { 200: json("One entry a minute", ThroughputResponse), ...errors(400, 404) },
    }),
    (c) => {
      const { queue } = c.req.valid("param");
      router.resolve(queue);
      return c.json({ queue, minutes: throughput.minutes(queue) }, 200);
    },
  );

  app.route("/v1", door);
}

function safeResolve(router: QueueRouter, queue: string): NamedBackend | null {
  try {
    return router.resolve(queue);
  } catch {
    return null;
  }
}
