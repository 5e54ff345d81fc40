import { type OpenAPIHono, z } from "@hono/zod-openapi";
import {
  type Backend,
  type GlideMqFlowJob,
  type GlideMqFlows,
  InvalidStateError,
  NotFoundError,
  UnsupportedError,
  ValidationError,
  hasGlideMqFlows,
} from "@switchyard/core";
import { HTTPException } from "hono/http-exception";
import type { NamedBackend } from "../backends.js";
import type { GatewayEnv } from "../errors.js";
import { BACKEND_ERRORS, body, guarded, json } from "./declare.js";
import { flowSnapshot } from "./glidemq-flow-view.js";
import { asGlideJob } from "./glidemq-jobs.js";
import * as S from "./glidemq-schemas.js";
import { Json } from "./native-schemas.js";

/*
 * glide-mq's proxy flows: POST /flows writes a FlowProducer.add tree (with the proxy's flow record),
 * GET /flows/:id and /flows/:id/tree show it, DELETE /flows/:id revokes what has not finished. Only a
 * store in glide-mq's layout (GlideMqFlows) holds flows; elsewhere the answer is a 501 naming it.
 */

/** One script call writes a flow; this bounds its size, as bulk adds are bounded. */
const MAX_FLOW_JOBS = 1000;

const FlowJob: z.ZodType<GlideMqFlowJob> = z.lazy(() =>
  z.object({
    name: z.string({ error: "missing required field: name" }).min(1, "missing required field: name"),
    queueName: z.string({ error: "missing required field: queueName" }).min(1, "missing required field: queueName"),
    data: Json.optional(),
    opts: S.JobOptions.optional(),
    children: z.array(FlowJob, { error: "children must be an array" }).optional(),
  }),
);

const FlowBody = z
  .object({
    flow: z.looseObject({}).optional().describe("A FlowProducer.add tree: {name, queueName, data?, opts?, children?: [...]}"),
    dag: z.looseObject({}).optional().describe("A FlowProducer.addDAG graph: not served by this gateway (501)"),
    budget: z.looseObject({}).optional().describe("A flow budget: not served by this gateway (501)"),
  })
  .openapi("GlideFlowBody");
const Ref = z.object({ jobId: z.string(), queueName: z.string() });
const FlowAdded = z.object({ flowId: z.string(), kind: z.literal("tree"), nodeCount: z.number(), root: Ref, roots: z.array(Ref) });
const FlowNode = S.GlideJob.extend({ flowId: z.string(), queueName: z.string() }).passthrough();
const FlowState = z.object({
  budget: z.null(),
  counts: z.record(z.string(), z.number()),
  createdAt: z.number(),
  flowId: z.string(),
  kind: z.enum(["tree", "dag"]),
  roots: z.array(Ref),
  usage: z.null(),
});
const FlowNodes = FlowState.extend({ nodes: z.array(FlowNode) });
const FlowTree = FlowState.extend({ tree: z.array(FlowNode).describe("Root jobs, each with `children` (the same shape, nested)") });
const FlowRevoked = z.object({
  flagged: z.number(),
  flowId: z.string(),
  jobs: z.array(z.object({ id: z.string(), queueName: z.string(), state: z.string().optional(), status: z.string() })),
  revoked: z.number(),
  skipped: z.number(),
});
const FlowParams = z.object({ id: z.string() });
const ERRORS = S.glideErrors(...BACKEND_ERRORS);

function countJobs(flow: GlideMqFlowJob): number {
  return 1 + (flow.children ?? []).reduce((sum, child) => sum + countJobs(child), 0);
}

function queuesOf(flow: GlideMqFlowJob, into = new Set<string>()): Set<string> {
  into.add(flow.queueName);
  for (const child of flow.children ?? []) queuesOf(child, into);
  return into;
}

/** The tree, checked; a refusal names the field by its path (`flow.children.0.name: ...`). */
function parseFlow(raw: unknown): GlideMqFlowJob {
  const parsed = FlowJob.safeParse(raw);
  if (!parsed.success) {
    const [issue] = parsed.error.issues;
    throw new ValidationError(`${["flow", ...(issue?.path ?? [])].join(".")}: ${issue?.message ?? "invalid"}`);
  }
  if (countJobs(parsed.data) > MAX_FLOW_JOBS) throw new ValidationError(`Too many jobs in flow (max ${MAX_FLOW_JOBS})`);
  return parsed.data;
}

/**
 * Revokes a job; false when it finished or went in the meantime. The store's revoke takes an active
 * job from its worker as well, so no job is left only flagged.
 */
async function revoke(store: Backend, queue: string, id: string): Promise<boolean> {
  try {
    await store.cancel(queue, id);
    return true;
  } catch (error) {
    if (error instanceof InvalidStateError || error instanceof NotFoundError) return false;
    throw error;
  }
}

function flowsOf(backend: Backend, what: string): Backend & GlideMqFlows {
  if (hasGlideMqFlows(backend)) return backend;
  throw new UnsupportedError(`${what} needs a store in glide-mq's layout; it is on a ${backend.kind} backend`);
}

export function mountFlowRoutes(door: OpenAPIHono<GatewayEnv>, on: (queue: string) => Backend, backends: Map<string, NamedBackend>): void {
  /** The store holding flow `id`'s record: flows are named by their root job, not by a queue. */
  async function storeOf(id: string) {
    const stores = [...backends.values()].map((named) => named.backend);
    for (const store of stores.filter(hasGlideMqFlows)) {
      const record = await store.flowRecord(id);
      if (record) return { store, record };
    }
    if (!stores.some(hasGlideMqFlows)) {
      throw new UnsupportedError(
        `flows need a store in glide-mq's layout; this gateway's backends are ${stores.map((s) => s.kind).join(", ")}`,
      );
    }
    throw new HTTPException(404, { message: "Flow not found" });
  }

  const add = body(FlowBody, false, "Bad request");
  door.openapi(
    guarded("glidemq", "write", {
      method: "post",
      path: "/flows",
      summary: "Add a flow (FlowProducer.add): children first, possibly nested and in other queues; the parent once they completed",
      middleware: add.middleware,
      request: { body: add.body },
      responses: { 201: json("Added", FlowAdded), ...S.glideErrors(...BACKEND_ERRORS, 409, 413) },
    }),
    async (c) => {
      const { flow, dag, budget } = c.req.valid("json");
      if ((flow === undefined) === (dag === undefined)) throw new ValidationError("Body must include exactly one of: flow, dag");
      if (dag !== undefined)
        throw new UnsupportedError("DAG flows ({dag}, FlowProducer.addDAG) are not served by this gateway yet; send a tree as {flow}");
      if (budget !== undefined) throw new UnsupportedError("flow budgets are not served by this gateway; send the flow without `budget`");
      const tree = parseFlow(flow);
      const store = on(tree.queueName);
      // One script writes the flow: every queue must live in the root's store.
      for (const queue of queuesOf(tree)) {
        if (on(queue) !== store)
          throw new ValidationError(`queue "${queue}" is routed to another store than the flow's root queue "${tree.queueName}"`);
      }
      const record = await flowsOf(store, `a flow in queue "${tree.queueName}"`).addFlow(tree);
      const root = record.roots[0] ?? { jobId: record.flowId, queueName: tree.queueName };
      return c.json({ flowId: record.flowId, kind: "tree" as const, nodeCount: record.jobs.length, root, roots: [root] }, 201);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/flows/{id}",
      summary: "A flow's jobs and the count per state",
      request: { params: FlowParams },
      responses: { 200: json("The flow", FlowNodes), ...ERRORS },
    }),
    async (c) => {
      const { store, record } = await storeOf(c.req.valid("param").id);
      const { tree: _tree, ...state } = await flowSnapshot(store, record);
      return c.json(state, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/flows/{id}/tree",
      summary: "A flow's jobs as the tree they run in",
      request: { params: FlowParams },
      responses: { 200: json("The flow", FlowTree), ...ERRORS },
    }),
    async (c) => {
      const { store, record } = await storeOf(c.req.valid("param").id);
      const { nodes: _nodes, ...state } = await flowSnapshot(store, record);
      return c.json(state, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "admin", {
      method: "delete",
      path: "/flows/{id}",
      summary: "Revoke a flow's jobs that have not finished, then forget the flow",
      request: { params: FlowParams },
      responses: { 200: json("What was revoked", FlowRevoked), ...ERRORS },
    }),
    async (c) => {
      const flowId = c.req.valid("param").id;
      const { store, record } = await storeOf(flowId);
      const jobs: z.infer<typeof FlowRevoked>["jobs"] = [];
      let revoked = 0;
      for (const ref of record.jobs) {
        const job = await store.get(ref.queueName, ref.jobId);
        const state = job ? asGlideJob(job).state : undefined;
        if (state === undefined) {
          jobs.push({ id: ref.jobId, queueName: ref.queueName, status: "missing" });
        } else if (state === "completed" || state === "failed" || !(await revoke(store, ref.queueName, ref.jobId))) {
          jobs.push({ id: ref.jobId, queueName: ref.queueName, state, status: "skipped" });
        } else {
          revoked += 1;
          jobs.push({ id: ref.jobId, queueName: ref.queueName, state, status: "revoked" });
        }
      }
      await store.removeFlowRecord(flowId);
      return c.json({ flagged: 0, flowId, jobs, revoked, skipped: jobs.length - revoked }, 200);
    },
  );
}
