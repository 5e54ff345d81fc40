import {
  type Backend,
  type GlideMqBudget,
  type GlideMqFlowRecord,
  type GlideMqFlowRef,
  type GlideMqUsage,
  hasGlideMqExtras,
} from "@switchyard/core";
import { type GlideJobJson, asGlideJob } from "./glidemq-jobs.js";

/*
 * A flow as glide-mq's proxy shows it (GET /flows/:id and /flows/:id/tree): every job of its record
 * with the flow's id and queue, the count per state, and the jobs arranged as the tree they run in.
 */

export type FlowNode = GlideJobJson & { flowId: string; queueName: string; parentIds?: string[]; parentQueues?: string[] };
export type FlowTreeNode = FlowNode & { children: FlowTreeNode[] };

export interface FlowSnapshot {
  budget: GlideMqBudget | null;
  counts: Record<string, number>;
  createdAt: number;
  flowId: string;
  kind: "tree" | "dag";
  nodes: FlowNode[];
  roots: GlideMqFlowRef[];
  tree: FlowTreeNode[];
  usage: GlideMqUsage | null;
}

const refKey = (ref: { jobId: string; queueName: string }) => `${ref.queueName}:${ref.jobId}`;
const byRef = (a: GlideMqFlowRef, b: GlideMqFlowRef) => a.queueName.localeCompare(b.queueName) || a.jobId.localeCompare(b.jobId);
const byRun = (a: FlowNode, b: FlowNode) => a.timestamp - b.timestamp || a.queueName.localeCompare(b.queueName) || a.id.localeCompare(b.id);

/** A DAG node's `parentIds`/`parentQueues` (JSON arrays in its hash), when it has them. */
function stringArray(raw: unknown): string[] | undefined {
  if (typeof raw !== "string") return undefined;
  try {
    const parsed: unknown = JSON.parse(raw);
    return Array.isArray(parsed) && parsed.every((item) => typeof item === "string") ? parsed : undefined;
  } catch {
    return undefined;
  }
}

async function nodeOf(backend: Backend, flowId: string, ref: GlideMqFlowRef): Promise<FlowNode | null> {
  const job = await backend.get(ref.queueName, ref.jobId);
  if (!job) return null;
  const glide = job.native.glide as { fields?: Record<string, unknown> } | undefined;
  const parentIds = stringArray(glide?.fields?.parentIds);
  const parentQueues = stringArray(glide?.fields?.parentQueues);
  return {
    ...asGlideJob(job),
    flowId,
    queueName: ref.queueName,
    ...(parentIds ? { parentIds } : {}),
    ...(parentQueues ? { parentQueues } : {}),
  };
}

/**
 * Who is drawn under whom: in a tree a job sits under its `parentId`; in a DAG a job's `parentIds`
 * are the jobs waiting on it, so they are drawn under it (the order they run in).
 */
function childrenOf(kind: "tree" | "dag", nodes: FlowNode[]): Map<string, FlowNode[]> {
  const byKey = new Map(nodes.map((node) => [refKey({ jobId: node.id, queueName: node.queueName }), node]));
  const under = new Map<string, FlowNode[]>();
  const put = (key: string, node: FlowNode) => under.set(key, [...(under.get(key) ?? []), node]);
  for (const node of nodes) {
    const own = refKey({ jobId: node.id, queueName: node.queueName });
    // The jobs it links to: its parentIds (a DAG node with several dependents), else its parentId.
    const linked =
      node.parentIds && node.parentQueues?.length === node.parentIds.length
        ? node.parentIds.map((jobId, i) => refKey({ jobId, queueName: node.parentQueues?.[i] ?? node.queueName }))
        : node.parentId
          ? [refKey({ jobId: node.parentId, queueName: node.parentQueue ?? node.queueName })]
          : [];
    for (const key of linked) {
      const other = byKey.get(key);
      if (kind === "dag" && other) put(own, other);
      if (kind === "tree") put(key, node);
    }
  }
  return under;
}

/** A job the record names but the store no longer has. */
function missing(flowId: string, ref: GlideMqFlowRef): FlowTreeNode {
  return {
    id: ref.jobId,
    name: "",
    data: null,
    opts: {},
    timestamp: 0,
    attemptsMade: 0,
    state: "missing",
    progress: 0,
    flowId,
    queueName: ref.queueName,
    children: [],
  };
}

function treeOf(flowId: string, kind: "tree" | "dag", roots: GlideMqFlowRef[], nodes: FlowNode[]): FlowTreeNode[] {
  const byKey = new Map(nodes.map((node) => [refKey({ jobId: node.id, queueName: node.queueName }), node]));
  const under = childrenOf(kind, nodes);
  // `path` holds the jobs above: a cycle is cut, and a job reached twice (a diamond) is drawn under each parent once.
  const visit = (ref: GlideMqFlowRef, path: Set<string>): FlowTreeNode => {
    const key = refKey(ref);
    const node = byKey.get(key);
    if (!node) return missing(flowId, ref);
    const seen = new Set<string>();
    const children: FlowTreeNode[] = [];
    for (const child of [...(under.get(key) ?? [])].sort(byRun)) {
      const childRef = { jobId: child.id, queueName: child.queueName };
      const childKey = refKey(childRef);
      if (seen.has(childKey)) continue;
      seen.add(childKey);
      children.push(path.has(childKey) ? { ...child, children: [] } : visit(childRef, new Set([...path, childKey])));
    }
    return { ...node, children };
  };
  return [...roots].sort(byRef).map((root) => visit(root, new Set([refKey(root)])));
}

/** The proxy's flow state; usage and budget those of the root (of a flow with one root), else null. */
export async function flowSnapshot(backend: Backend, record: GlideMqFlowRecord): Promise<FlowSnapshot> {
  const nodes: FlowNode[] = [];
  const counts: Record<string, number> = {};
  for (const ref of record.jobs) {
    const node = await nodeOf(backend, record.flowId, ref);
    if (!node) continue;
    counts[node.state] = (counts[node.state] ?? 0) + 1;
    nodes.push(node);
  }
  nodes.sort(byRun);
  const roots = [...record.roots].sort(byRef);
  const [root] = roots;
  const extras = roots.length === 1 && root && hasGlideMqExtras(backend) ? backend : undefined;
  return {
    budget: extras && root ? await extras.flowBudget(root.queueName, root.jobId) : null,
    counts,
    createdAt: record.createdAt,
    flowId: record.flowId,
    kind: record.kind,
    nodes,
    roots,
    tree: treeOf(record.flowId, record.kind, roots, nodes),
    usage: extras && root ? await extras.flowUsage(root.queueName, root.jobId) : null,
  };
}
