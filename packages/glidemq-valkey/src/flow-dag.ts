import { randomBytes } from "node:crypto";
import { ConflictError, type GlideMqDagNode, type GlideMqFlows, UnsupportedError, ValidationError } from "@switchyard/core";
import type { QueueKeys } from "./keys.js";
import type { GlideJobOptions } from "./options.js";
import { GlideProducer, type GlideProducerOptions } from "./producer.js";
import { type RedisClient, isCluster, runScript } from "./scripts.js";

/*
 * glide-mq's proxy DAGs (POST /flows with `{dag}`): FlowProducer.addDAG's layout written in one
 * script (flow-dag.lua), with the proxy's flow record under a random flow id.
 */

/** One node's write: `parent` when it has deps; `piggy` its one dependent (a leaf's parentId); `register` the dependents listed in parentIds. */
interface Step {
  n: number;
  parent: boolean;
  piggy: number;
  register: number[];
}

/** A cycle for the refusal, as glide-mq names one: `a -> b -> a`. */
function cycleOf(remaining: string[], dependents: Map<string, string[]>): string[] {
  const left = new Set(remaining);
  const visited = new Set<string>();
  const path: string[] = [];
  const visit = (name: string): boolean => {
    if (path.includes(name)) {
      path.splice(0, path.indexOf(name));
      path.push(name);
      return true;
    }
    if (visited.has(name)) return false;
    visited.add(name);
    path.push(name);
    for (const next of dependents.get(name) ?? []) if (left.has(next) && visit(next)) return true;
    path.pop();
    return false;
  };
  for (const name of remaining) if (visit(name)) return path;
  return remaining;
}

/**
 * addDAG's write order (nodes 1-based): checked as glide-mq checks a DAG, then sorted (Kahn, deps
 * first), levels by longest dep chain, written from the deepest level up so that each node's
 * dependents exist when it is wired.
 */
export function dagSteps(nodes: GlideMqDagNode[]): Step[] {
  const index = new Map<string, number>();
  for (const [i, node] of nodes.entries()) {
    if (index.has(node.name)) throw new ValidationError(`Duplicate node name: ${node.name}`);
    index.set(node.name, i + 1);
  }
  const dependents = new Map<string, string[]>(nodes.map((node) => [node.name, []]));
  for (const node of nodes) {
    for (const dep of node.deps ?? []) {
      if (!index.has(dep)) throw new ValidationError(`Node "${node.name}" depends on unknown node "${dep}"`);
      if (dep === node.name) throw new ValidationError(`DAG contains a cycle: ${dep} -> ${dep}`);
      dependents.get(dep)?.push(node.name);
    }
  }
  const waiting = new Map(nodes.map((node) => [node.name, (node.deps ?? []).length]));
  const ready = nodes.filter((node) => (node.deps ?? []).length === 0).map((node) => node.name);
  const sorted: string[] = [];
  while (ready.length > 0) {
    const name = ready.shift() as string;
    sorted.push(name);
    for (const next of dependents.get(name) ?? []) {
      const left = (waiting.get(next) ?? 0) - 1;
      waiting.set(next, left);
      if (left === 0) ready.push(next);
    }
  }
  if (sorted.length < nodes.length) {
    const remaining = nodes.filter((node) => (waiting.get(node.name) ?? 0) > 0).map((node) => node.name);
    throw new ValidationError(`DAG contains a cycle: ${cycleOf(remaining, dependents).join(" -> ")}`);
  }
  const level = new Map<string, number>();
  for (const name of sorted) {
    const deps = nodes[(index.get(name) as number) - 1]?.deps ?? [];
    level.set(name, Math.max(0, ...deps.map((dep) => (level.get(dep) ?? 0) + 1)));
  }
  const deepest = Math.max(0, ...level.values());
  const steps: Step[] = [];
  for (let at = deepest; at >= 0; at--) {
    for (const name of sorted.filter((candidate) => level.get(candidate) === at)) {
      const mine = (dependents.get(name) ?? []).map((dependent) => index.get(dependent) as number);
      const hasDeps = (nodes[(index.get(name) as number) - 1]?.deps ?? []).length > 0;
      const piggy = !hasDeps && mine.length === 1 ? (mine[0] as number) : 0;
      steps.push({ n: index.get(name) as number, parent: hasDeps, piggy, register: piggy > 0 ? [] : mine });
    }
  }
  return steps;
}

export function glideDags(
  ready: () => Promise<RedisClient>,
  keysOf: (queue: string) => QueueKeys,
  producing: GlideProducerOptions & { prefix: string },
): Pick<GlideMqFlows, "addDag"> {
  return {
    async addDag(nodes) {
      const redis = await ready();
      if (isCluster(redis)) {
        throw new UnsupportedError(
          "glidemq-valkey: DAGs through the proxy routes need a standalone server (a DAG's keys span cluster slots)",
        );
      }
      if (nodes.length === 0) throw new ValidationError("dag.nodes must not be empty");
      const steps = dagSteps(nodes);
      const createdAt = Date.now();
      // Every node is checked (queue name, options, job id) before the script runs: all or nothing.
      const args = nodes.map((node) => {
        const prepared = new GlideProducer(redis, node.queueName, producing).prepare({
          name: node.name,
          data: node.data,
          opts: node.opts as GlideJobOptions | undefined,
          timestamp: createdAt,
        });
        return [keysOf(node.queueName).base.slice(0, -1), node.queueName, ...prepared];
      });
      const roots = nodes.flatMap((node, i) => ((node.deps ?? []).length === 0 ? [i + 1] : []));
      const flowId = randomBytes(12).toString("hex");
      const plan = JSON.stringify({ steps, roots, recordPrefix: producing.prefix, flowId, createdAt });
      const first = nodes[0] as GlideMqDagNode;
      const reply = (await runScript(redis, "flow-dag", [keysOf(first.queueName).id], [plan, ...args.flat()])) as string[];
      if (reply[0] === "duplicate") throw new ConflictError(`Duplicate job ID in DAG: ${String(reply[1])}`);
      const ids = reply.slice(1).map(String);
      const jobs = ids.map((jobId, i) => ({ jobId, queueName: nodes[i]?.queueName ?? "" }));
      return {
        record: { flowId, kind: "dag", createdAt, jobs, roots: roots.map((n) => jobs[n - 1] as { jobId: string; queueName: string }) },
        ids,
      };
    },
  };
}
