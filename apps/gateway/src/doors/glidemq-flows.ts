import { type OpenAPIHono, z } from "@hono/zod-openapi";
import {
  type Backend,
  type GlideMqDagNode,
  type GlideMqFlowJob,
  type GlideMqFlows,
  InvalidStateError,
  NotFoundError,
  UnsupportedError,
  ValidationError,
  hasGlideMqExtras,
  hasGlideMqFlows,
} from "@switchyard/core";
import { HTTPException } from "hono/http-exception";
import type { NamedBackend } from "../backends.js";
import type { GatewayEnv } from "../errors.js";
import { BACKEND_ERRORS, body, guarded, json } from "./declare.js";
import { flowSnapshot } from "./glidemq-flow-view.js";
import { asGlideJob } from "./glidemq-jobs.js";
import * as S from "./glidemq-schemas.js";
import { Budget, Usage } from "./glidemq-usage.js";
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

const DagNode = z.object({
  name: z.string({ error: "missing required field: name" }).min(1, "missing required field: name"),
  queueName: S.QueueParams.shape.queue,
  data: Json.optional(),
  opts: S.JobOptions.optional(),
  deps: z.array(z.string(), { error: "deps must be an array of node names" }).optional(),
});
const Dag = z.object({
  nodes: z
    .array(DagNode, { error: "nodes must be an array" })
    .min(1, "nodes must not be empty")
    .max(MAX_FLOW_JOBS, `Too many jobs in DAG (max ${MAX_FLOW_JOBS})`),
});

const amount = (field: string) =>
  z
    .number({ error: `budget.${field} must be a non-negative number` })
    .finite()
    .nonnegative(`budget.${field} must be a non-negative number`);
const amounts = (field: string) => z.record(z.string(), amount(field), { error: `budget.${field} must be an object of numbers` });
/** FlowProducer.add's budget, checked before anything is written (glide-mq stores whatever it is given). */
const BudgetLimits = z
  .object(
    {
      maxTotalTokens: amount("maxTotalTokens").optional(),
      maxTokens: amounts("maxTokens").optional(),
      tokenWeights: amounts("tokenWeights").optional(),
      maxTotalCost: amount("maxTotalCost").optional(),
      maxCosts: amounts("maxCosts").optional(),
      costUnit: z.string({ error: "budget.costUnit must be a string" }).max(64).optional(),
      onExceeded: z.enum(["pause", "fail"], { error: "budget.onExceeded must be one of: pause, fail" }).optional(),
    },
    { error: "budget must be an object" },
  )
  .describe("A flow budget (tree flows only): glide-mq's workers fail or pause the flow's jobs once it is used up");
const FlowBody = z
  .object({
    flow: z.looseObject({}).optional().describe("A FlowProducer.add tree: {name, queueName, data?, opts?, children?: [...]}"),
    dag: z
      .looseObject({})
      .optional()
      .describe("A FlowProducer.addDAG graph: {nodes: [{name, queueName, data?, opts?, deps?: [names that run first]}]}"),
    budget: BudgetLimits.optional(),
  })
  .openapi("GlideFlowBody");
const Ref = z.object({ jobId: z.string(), queueName: z.string() });
const TreeAdded = z.object({ flowId: z.string(), kind: z.literal("tree"), nodeCount: z.number(), root: Ref, roots: z.array(Ref) });
const DagAdded = z.object({
  flowId: z.string(),
  jobs: z.array(z.object({ id: z.string(), name: z.string(), queueName: z.string() })),
  kind: z.literal("dag"),
  nodeCount: z.number(),
  roots: z.array(Ref),
});
const FlowAdded = z.union([TreeAdded, DagAdded]);
const FlowNode = S.GlideJob.extend({ flowId: z.string(), queueName: z.string() }).passthrough();
const FlowState = z.object({
  budget: Budget.nullable(),
  counts: z.record(z.string(), z.number()),
  createdAt: z.number(),
  flowId: z.string(),
  kind: z.enum(["tree", "dag"]),
  roots: z.array(Ref),
  usage: Usage.nullable(),
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

/** The DAG, checked; a refusal names the field by its path (`dag.nodes.0.name: ...`). */
function parseDag(raw: unknown): GlideMqDagNode[] {
  const parsed = Dag.safeParse(raw);
  if (!parsed.success) {
    const [issue] = parsed.error.issues;
    throw new ValidationError(`${["dag", ...(issue?.path ?? [])].join(".")}: ${issue?.message ?? "invalid"}`);
  }
  return parsed.data.nodes;
}

/** Every queue of a flow must live in one store: one script writes it. */
function oneStore(on: (queue: string) => Backend, queues: Iterable<string>, first: string): Backend {
  const store = on(first);
  for (const queue of queues) {
    if (on(queue) !== store) throw new ValidationError(`queue "${queue}" is routed to another store than the flow's queue "${first}"`);
  }
  return store;
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
      summary:
        "Add a flow: a tree (FlowProducer.add: children first, nested, across queues) or a DAG (FlowProducer.addDAG: each node after its deps)",
      middleware: add.middleware,
      request: { body: add.body },
      responses: { 201: json("Added", FlowAdded), ...S.glideErrors(...BACKEND_ERRORS, 409, 413) },
    }),
    async (c) => {
      const { flow, dag, budget } = c.req.valid("json");
      if ((flow === undefined) === (dag === undefined)) throw new ValidationError("Body must include exactly one of: flow, dag");
      if (dag !== undefined && budget !== undefined) throw new ValidationError("budget is currently supported only for tree flows");
      if (dag !== undefined) {
        const nodes = parseDag(dag);
        const first = (nodes[0] as GlideMqDagNode).queueName;
        const store = oneStore(on, new Set(nodes.map((node) => node.queueName)), first);
        const { record, ids } = await flowsOf(store, `a DAG in queue "${first}"`).addDag(nodes);
        const jobs = nodes.map((node, i) => ({ id: ids[i] ?? "", name: node.name, queueName: node.queueName }));
        return c.json({ flowId: record.flowId, jobs, kind: "dag" as const, nodeCount: nodes.length, roots: record.roots }, 201);
      }
      const tree = parseFlow(flow);
      const store = oneStore(on, queuesOf(tree), tree.queueName);
      const flows = flowsOf(store, `a flow in queue "${tree.queueName}"`);
      if (budget !== undefined && !hasGlideMqExtras(flows))
        throw new UnsupportedError(`a flow budget needs a store in glide-mq's layout; it is on a ${store.kind} backend`);
      const record = await flows.addFlow(tree);
      // As FlowProducer.add: the budget is written once the flow is, then named in each of its jobs.
      if (budget !== undefined && hasGlideMqExtras(flows)) await flows.setFlowBudget(tree.queueName, record.flowId, budget, record.jobs);
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
