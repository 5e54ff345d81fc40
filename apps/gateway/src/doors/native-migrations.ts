import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { JOB_STATES, NotFoundError } from "@switchyard/core";
import type { GatewayEnv } from "../errors.js";
import type { MigrationRuns } from "../migrate/runs.js";
import { body, errors, guarded, json } from "./declare.js";

/*
 * /v1/migrations: migrations and bridges that the gateway runs between its configured backends, with
 * their progress (also in /metrics and on the dashboard). Starting and stopping one is `admin`;
 * reading them is `read`.
 */

const QueueProgress = z.object({
  queue: z.string(),
  state: z.enum(["waiting", "running", "done", "failed"]),
  copied: z.number().int(),
  total: z.number().int().nullable(),
  verified: z.boolean().optional(),
});
const MigrationRun = z
  .object({
    id: z.string(),
    kind: z.enum(["migrate", "bridge"]),
    from: z.string(),
    to: z.string(),
    state: z.enum(["running", "finished", "failed", "stopped"]),
    startedAt: z.number().int(),
    finishedAt: z.number().int().optional(),
    copied: z.number().int(),
    total: z.number().int().nullable(),
    error: z.string().optional(),
    queues: z.array(QueueProgress),
  })
  .openapi("MigrationRun");
const RunResponse = z.object({ run: MigrationRun }).openapi("MigrationRunResponse");
const RunsResponse = z.object({ runs: z.array(MigrationRun) }).openapi("MigrationRunsResponse");
const RunParams = z.object({ id: z.string().uuid({ message: "a run id is a UUID" }) });

const Name = z.string().min(1).max(100);
const StartBody = z
  .strictObject({
    kind: z.enum(["migrate", "bridge"]).describe("migrate: copy (or move) what is there once; bridge: move what arrives until stopped."),
    from: Name.describe("The configured backend to read."),
    to: Name.describe("The configured backend to write."),
    queue: Name.optional().describe("A queue name or pattern (`*`); every queue of the source when left out."),
    targetQueue: Name.optional().describe("Write into this queue instead (one queue only)."),
    states: z.array(z.enum(JOB_STATES)).min(1).optional().describe("Only jobs in these states (migrate)."),
    mode: z.enum(["copy", "move"]).optional().describe("migrate only: copy (default) or move."),
    waitActive: z
      .number()
      .min(0)
      .max(86_400)
      .optional()
      .describe("migrate with mode move: seconds to wait at the end for jobs that were active to finish, to move them too."),
    idPrefix: z.string().min(1).max(100).optional().describe("Moved jobs get ids with this prefix (a target that numbers its own jobs)."),
    batchSize: z.number().int().min(1).max(10_000).optional(),
    intervalMs: z.number().int().min(10).max(3_600_000).optional().describe("bridge only: the wait between passes that found nothing."),
  })
  .openapi("MigrationRunBody");

export function mountMigrationRoutes(door: OpenAPIHono<GatewayEnv>, runs: MigrationRuns): void {
  const runOf = (id: string) => {
    const run = runs.get(id);
    if (!run) throw new NotFoundError(`no migration run "${id}"`);
    return run;
  };

  door.openapi(
    guarded("native", "read", {
      method: "get",
      path: "/migrations",
      summary: "The migrations and bridges this gateway runs or ran, newest first, with their progress",
      responses: { 200: json("The runs", RunsResponse) },
    }),
    (c) => c.json({ runs: runs.list() }, 200),
  );

  const start = body(StartBody);
  door.openapi(
    guarded("native", "admin", {
      method: "post",
      path: "/migrations",
      summary: "Start a migration (once) or a bridge (until stopped) between two configured backends",
      middleware: start.middleware,
      request: { body: start.body },
      responses: { 202: json("The run, started", RunResponse), ...errors(400, 413) },
    }),
    (c) => c.json({ run: runs.start(c.req.valid("json")) }, 202),
  );

  door.openapi(
    guarded("native", "read", {
      method: "get",
      path: "/migrations/{id}",
      summary: "One run and its progress",
      request: { params: RunParams },
      responses: { 200: json("The run", RunResponse), ...errors(400, 404) },
    }),
    (c) => c.json({ run: runOf(c.req.valid("param").id) }, 200),
  );

  door.openapi(
    guarded("native", "admin", {
      method: "delete",
      path: "/migrations/{id}",
      summary: "Stop a run after the page in hand",
      request: { params: RunParams },
      responses: { 200: json("The run, stopped", RunResponse), ...errors(400, 404) },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      runOf(id);
      return c.json({ run: (await runs.stop(id)) ?? runOf(id) }, 200);
    },
  );
}
