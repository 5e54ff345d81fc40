import {
  ConflictError,
  type GlideMqFlowJob,
  type GlideMqFlowRecord,
  type GlideMqFlowRef,
  type GlideMqFlows,
  UnsupportedError,
} from "@switchyard/core";
import type { QueueKeys } from "./keys.js";
import type { GlideJobOptions } from "./options.js";
import { GlideProducer, type GlideProducerOptions } from "./producer.js";
import { type RedisClient, isCluster, runScript } from "./scripts.js";

/*
 * glide-mq's proxy flows (POST /flows with `{flow}`): FlowProducer.add's tree written in one script
 * (flow-tree.lua) with the proxy's flow record, and that record read back for GET /flows/:id.
 */

/** One level of the tree as FlowProducer.add writes it: a parent, its leaf children, its sub-flows (1-based). */
interface Group {
  p: number;
  leaves: number[];
  subs: number[];
}

/** The proxy's `{flow:<id>}` keys; the flow record lives beside the queues, under the same prefix. */
function recordKeys(prefix: string, flowId: string) {
  const base = `${prefix}:{flow:${flowId}}:`;
  return { meta: `${base}meta`, jobs: `${base}jobs`, roots: `${base}roots` };
}

/** `queue:jobId` as the proxy encodes a flow's job (queue names hold no colon). */
function decodeRef(raw: string): GlideMqFlowRef | null {
  const separator = raw.indexOf(":");
  if (separator <= 0 || separator === raw.length - 1) return null;
  return { queueName: raw.slice(0, separator), jobId: raw.slice(separator + 1) };
}

/**
 * The nodes' script arguments and the levels in FlowProducer's write order: a child that has children
 * of its own is a sub-flow, written (depth first) before its parent's level, as FlowProducer recurses.
 */
function planOf(flow: GlideMqFlowJob, argsOf: (job: GlideMqFlowJob) => string[]): { groups: Group[]; nodes: string[][]; queues: string[] } {
  const groups: Group[] = [];
  const nodes: string[][] = [];
  const queues: string[] = [];
  const addNode = (job: GlideMqFlowJob): number => {
    nodes.push(argsOf(job));
    queues.push(job.queueName);
    return nodes.length;
  };
  const visit = (job: GlideMqFlowJob): number => {
    const children = job.children ?? [];
    const subs = children.filter((child) => (child.children ?? []).length > 0).map(visit);
    const p = addNode(job);
    const leaves = children.filter((child) => (child.children ?? []).length === 0).map(addNode);
    groups.push({ p, leaves, subs });
    return groups.length;
  };
  visit(flow);
  return { groups, nodes, queues };
}

export function glideFlows(
  ready: () => Promise<RedisClient>,
  keysOf: (queue: string) => QueueKeys,
  producing: GlideProducerOptions & { prefix: string },
): Omit<GlideMqFlows, "addDag"> /* DAGs: flow-dag.ts */ {
  return {
    async addFlow(flow) {
      const redis = await ready();
      if (isCluster(redis)) {
        throw new UnsupportedError(
          "glidemq-valkey: flows through the proxy routes need a standalone server (a flow's keys span cluster slots)",
        );
      }
      const createdAt = Date.now();
      // Every node is checked (queue name, options, job id) before the script runs: all or nothing.
      const { groups, nodes, queues } = planOf(flow, (job) => {
        const keys = keysOf(job.queueName);
        const args = new GlideProducer(redis, job.queueName, producing).prepare({
          name: job.name,
          data: job.data,
          opts: job.opts as GlideJobOptions | undefined,
          timestamp: createdAt,
        });
        return [keys.base.slice(0, -1), job.queueName, ...args];
      });
      const plan = JSON.stringify({ groups, recordPrefix: producing.prefix, createdAt });
      const reply = (await runScript(redis, "flow-tree", [keysOf(flow.queueName).id], [plan, ...nodes.flat()])) as string[];
      if (reply[0] === "duplicate") throw new ConflictError(`Duplicate job ID in flow: ${String(reply[1])}`);
      const ids = reply.slice(1).map(String);
      const jobs = ids.map((jobId, i) => ({ jobId, queueName: queues[i] ?? "" }));
      const root = jobs[(groups.at(-1)?.p ?? 1) - 1] as GlideMqFlowRef;
      return { flowId: root.jobId, kind: "tree", createdAt, jobs, roots: [root] };
    },

    async flowRecord(flowId) {
      const redis = await ready();
      const keys = recordKeys(producing.prefix, flowId);
      const meta = await redis.hgetall(keys.meta);
      if (!meta.kind) return null;
      const refs = async (key: string) => (await redis.smembers(key)).map(decodeRef).filter((ref): ref is GlideMqFlowRef => ref !== null);
      const record: GlideMqFlowRecord = {
        flowId,
        kind: meta.kind === "dag" ? "dag" : "tree",
        createdAt: Number(meta.createdAt ?? 0),
        jobs: await refs(keys.jobs),
        roots: await refs(keys.roots),
      };
      return record;
    },

    async removeFlowRecord(flowId) {
      const keys = recordKeys(producing.prefix, flowId);
      await (await ready()).unlink(keys.meta, keys.jobs, keys.roots);
    },
  };
}
