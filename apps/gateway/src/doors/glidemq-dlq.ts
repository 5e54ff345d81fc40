import type { OpenAPIHono } from "@hono/zod-openapi";
import { type Backend, NotFoundError } from "@switchyard/core";
import type { GatewayEnv } from "../errors.js";
import { BACKEND_ERRORS, body, guarded, json } from "./declare.js";
import { glideOf } from "./glidemq-native.js";
import * as S from "./glidemq-schemas.js";

const ERRORS = S.glideErrors(...BACKEND_ERRORS);
const DEAD_LETTERS = "the dead-letter queue";

/** glide-mq's 404 for a dead letter that is not there (or not this queue's). */
const gone = () => new NotFoundError("DLQ job not found");

/**
 * glide-mq's dead-letter routes: the jobs that failed for good in a queue and were moved to the
 * dead-letter queue its workers were given (meta `deadLetterQueueName`), read, removed, or replayed
 * into the queue they failed in. A queue without a dead-letter queue has none (an empty list, 404s).
 */
export function mountDeadLetterRoutes(door: OpenAPIHono<GatewayEnv>, on: (queue: string) => Backend): void {
  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/dlq",
      summary: "The queue's dead letters, positions start..end (-1: the last), oldest first",
      request: { params: S.QueueParams, query: S.DlqQuery },
      responses: { 200: json("The dead letters", S.DeadLetters), ...ERRORS },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const { start = 0, end = -1 } = c.req.valid("query");
      const jobs = await glideOf(on(queue), queue, DEAD_LETTERS).deadLetters(queue, start, end);
      return c.json({ count: jobs.length, jobs }, 200);
    },
  );

  const replayAll = body(S.ReplayAllBody, true, "Bad request");
  door.openapi(
    guarded("glidemq", "admin", {
      method: "post",
      path: "/queues/{queue}/dlq/replay-all",
      summary: "Replay the first `count` dead letters (all by default) into the queue, oldest first",
      middleware: replayAll.middleware,
      request: { params: S.QueueParams, query: S.ReplayAllQuery, body: replayAll.body },
      responses: { 200: json("The jobs added", S.ReplayedAll), ...S.glideErrors(...BACKEND_ERRORS, 413) },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const count = c.req.valid("json")?.count ?? c.req.valid("query").count;
      const backend = glideOf(on(queue), queue, DEAD_LETTERS);
      const jobs: Array<{ id: string; name: string; sourceId: string }> = [];
      for (const letter of await backend.deadLetters(queue, 0, count === undefined ? -1 : count - 1)) {
        // One another caller replayed or removed meanwhile is passed over, as glide-mq passes it over.
        const replayed = await backend.replayDeadLetter(queue, letter.id);
        if (replayed) jobs.push({ id: replayed.id, name: replayed.name, sourceId: letter.id });
      }
      return c.json({ jobs, replayed: jobs.length }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/dlq/{id}",
      summary: "One dead letter of the queue",
      request: { params: S.JobParams },
      responses: { 200: json("The dead letter", S.DeadLetter), ...ERRORS },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const letter = await glideOf(on(queue), queue, DEAD_LETTERS).deadLetter(queue, id);
      if (!letter) throw gone();
      return c.json(letter, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "admin", {
      method: "delete",
      path: "/queues/{queue}/dlq/{id}",
      summary: "Remove a dead letter",
      request: { params: S.JobParams },
      responses: { 200: json("Removed", S.DeadLetterRemoved), ...ERRORS },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      if (!(await glideOf(on(queue), queue, DEAD_LETTERS).removeDeadLetter(queue, id))) throw gone();
      return c.json({ removed: true as const }, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "admin", {
      method: "post",
      path: "/queues/{queue}/dlq/{id}/replay",
      summary: "Add a dead letter again to the queue it failed in (its original data and options when that job still exists)",
      request: { params: S.JobParams },
      responses: { 200: json("The new job", S.Replayed), ...S.glideErrors(...BACKEND_ERRORS, 409) },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      const replayed = await glideOf(on(queue), queue, DEAD_LETTERS).replayDeadLetter(queue, id);
      if (!replayed) throw gone();
      return c.json({ name: replayed.name, newJobId: replayed.id }, 200);
    },
  );
}
