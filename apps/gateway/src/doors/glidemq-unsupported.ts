import { type RouteConfig, z } from "@hono/zod-openapi";
import type { Access } from "../auth.js";
import { GlideError, JobParams, QueueParams } from "./glidemq-schemas.js";

/**
 * The routes of glide-mq's proxy that rest on glide-mq features no Backend offers yet (flow
 * budgets, usage, broadcast, suspend and signal, a job's output stream). They are declared, so a
 * client gets a 501 `{error}` naming the feature and the queue's backend rather than a 404 that looks
 * like a wrong path.
 */
interface UnsupportedRoute {
  feature: string;
  access: Access;
  route: RouteConfig;
}

const answer = {
  501: { description: "Not served by this gateway", content: { "application/json": { schema: GlideError } } },
};
const FlowParams = QueueParams.extend({ parentId: z.string() });
const BudgetParams = QueueParams.extend({ flowId: z.string() });
const BroadcastParams = z.object({ name: z.string() });

function unsupported(feature: string, access: Access, method: RouteConfig["method"], path: string, params?: z.ZodObject): UnsupportedRoute {
  return {
    feature,
    access,
    route: {
      method,
      path,
      summary: `${feature} (glide-mq only; answers 501)`,
      ...(params ? { request: { params } } : {}),
      responses: answer,
    },
  };
}

export const UNSUPPORTED_ROUTES: UnsupportedRoute[] = [
  unsupported("a job's output stream", "read", "get", "/queues/{queue}/jobs/{id}/stream", JobParams),
  unsupported("suspending a job", "read", "get", "/queues/{queue}/jobs/{id}/suspend", JobParams),
  unsupported("signalling a suspended job", "write", "post", "/queues/{queue}/jobs/{id}/signal", JobParams),
  unsupported("the suspended jobs", "read", "get", "/queues/{queue}/suspended", QueueParams),
  unsupported("a flow's usage", "read", "get", "/queues/{queue}/flows/{parentId}/usage", FlowParams),
  unsupported("a flow's budget", "read", "get", "/queues/{queue}/flows/{flowId}/budget", BudgetParams),
  unsupported("the usage summary", "read", "get", "/usage/summary"),
  unsupported("broadcast", "write", "post", "/broadcast/{name}", BroadcastParams),
  unsupported("broadcast", "read", "get", "/broadcast/{name}/events", BroadcastParams),
];
