import type { GlideMqBudget, GlideMqExtras, GlideMqUsage } from "@switchyard/core";
import type { QueueKeys } from "./keys.js";
import type { RedisClient } from "./scripts.js";

/*
 * The AI usage glide-mq's workers report (`job.reportUsage()`): `usage:*` fields on the job hash,
 * per-minute rollups `usage:<bucketTs>` with the global set `<prefix>:usage:queues`, and the flow
 * budgets its FlowProducer writes (`budget:<flowId>`). Read as glide-mq's Queue reads them.
 */

const USAGE_FIELDS = ["usage:model", "usage:tokens", "usage:costs", "usage:totalTokens", "usage:totalCost", "usage:costUnit"] as const;

/** A JSON object of numbers, or undefined (glide-mq's parseJsonRecord). */
function numbers(raw: string | null | undefined): Record<string, number> | undefined {
  if (!raw) return undefined;
  try {
    const parsed = JSON.parse(raw) as unknown;
    return parsed && typeof parsed === "object" ? (parsed as Record<string, number>) : undefined;
  } catch {
    return undefined;
  }
}

function finite(raw: string | null | undefined): number {
  const value = raw ? Number.parseFloat(raw) : 0;
  return Number.isFinite(value) ? value : 0;
}

function addInto(target: Record<string, number>, values: Record<string, number> | undefined): void {
  for (const [key, value] of Object.entries(values ?? {})) if (Number.isFinite(value)) target[key] = (target[key] ?? 0) + value;
}

/** Adds one job's usage fields (in USAGE_FIELDS order); a job that reported nothing is not counted. */
function addJob(total: GlideMqUsage, values: Array<string | null>): void {
  const [model, tokens, costs, totalTokens, totalCost, costUnit] = values;
  if (!model && !tokens && !costs && !finite(totalTokens) && !finite(totalCost)) return;
  total.totalTokens += finite(totalTokens);
  total.totalCost += finite(totalCost);
  total.jobCount += 1;
  if (costUnit && total.costUnit === undefined) total.costUnit = costUnit;
  if (model) total.models[model] = (total.models[model] ?? 0) + 1;
  addInto(total.tokens, numbers(tokens));
  addInto(total.costs, numbers(costs));
}

type Usage = Pick<GlideMqExtras, "flowUsage" | "flowBudget" | "setFlowBudget" | "usageQueues" | "usageBuckets">;

export function usage(ready: () => Promise<RedisClient>, keysOf: (queue: string) => QueueKeys, prefix: string): Usage {
  return {
    async flowUsage(queue, parentId) {
      const redis = await ready();
      const keys = keysOf(queue);
      const total: GlideMqUsage = { tokens: {}, totalTokens: 0, costs: {}, totalCost: 0, jobCount: 0, models: {} };
      addJob(total, await redis.hmget(keys.job(parentId), ...USAGE_FIELDS));
      // Children are `<childPrefix>:<childId>` members, possibly of other queues (other cluster slots).
      const members = await redis.smembers(keys.deps(parentId));
      const children = await Promise.all(
        members.flatMap((member) => {
          const colon = member.lastIndexOf(":");
          return colon === -1 ? [] : [redis.hmget(`${member.slice(0, colon)}:job:${member.slice(colon + 1)}`, ...USAGE_FIELDS)];
        }),
      );
      for (const values of children) addJob(total, values);
      // costUnit sits after totalCost in glide-mq's answer.
      const { jobCount, models, costUnit, ...sums } = total;
      return { ...sums, ...(costUnit !== undefined ? { costUnit } : {}), jobCount, models };
    },

    async flowBudget(queue, flowId) {
      const fields = await (await ready()).hgetall(`${keysOf(queue).base}budget:${flowId}`);
      if (Object.keys(fields).length === 0) return null;
      const budget: GlideMqBudget = {
        usedTokens: finite(fields.usedTokens),
        usedCost: finite(fields.usedCost),
        exceeded: fields.exceeded === "1",
        onExceeded: fields.onExceeded === "pause" ? "pause" : "fail",
      };
      const limits = {
        ...(fields.maxTotalTokens ? { maxTotalTokens: Number.parseFloat(fields.maxTotalTokens) } : {}),
        ...(numbers(fields.maxTokens) ? { maxTokens: numbers(fields.maxTokens) } : {}),
        ...(numbers(fields.tokenWeights) ? { tokenWeights: numbers(fields.tokenWeights) } : {}),
        ...(fields.maxTotalCost ? { maxTotalCost: Number.parseFloat(fields.maxTotalCost) } : {}),
        ...(numbers(fields.maxCosts) ? { maxCosts: numbers(fields.maxCosts) } : {}),
        ...(fields.costUnit ? { costUnit: fields.costUnit } : {}),
      };
      return { ...limits, ...budget };
    },

    async setFlowBudget(queue, flowId, limits, jobs) {
      const redis = await ready();
      const budgetKey = `${keysOf(queue).base}budget:${flowId}`;
      // Field order and text as FlowProducer.add writes them: the counters, then the limits given.
      const fields: Record<string, string> = { usedTokens: "0", usedCost: "0", exceeded: "0", onExceeded: limits.onExceeded ?? "fail" };
      if (limits.maxTotalTokens !== undefined) fields.maxTotalTokens = String(limits.maxTotalTokens);
      if (limits.maxTokens !== undefined) fields.maxTokens = JSON.stringify(limits.maxTokens);
      if (limits.tokenWeights !== undefined) fields.tokenWeights = JSON.stringify(limits.tokenWeights);
      if (limits.maxTotalCost !== undefined) fields.maxTotalCost = String(limits.maxTotalCost);
      if (limits.maxCosts !== undefined) fields.maxCosts = JSON.stringify(limits.maxCosts);
      if (limits.costUnit !== undefined) fields.costUnit = limits.costUnit;
      await redis.hset(budgetKey, fields);
      // One command per job: the flow's queues may live in other cluster slots.
      await Promise.all(jobs.map((job) => redis.hset(keysOf(job.queueName).job(job.jobId), "budgetKey", budgetKey)));
    },

    async usageQueues() {
      return (await ready()).smembers(`${prefix}:usage:queues`);
    },

    async usageBuckets(queue, bucketStarts) {
      const redis = await ready();
      const base = keysOf(queue).base;
      const answers: Array<Record<string, string>> = [];
      // In chunks of 1000 bucket reads per pipeline, as glide-mq batches them.
      for (let offset = 0; offset < bucketStarts.length; offset += 1000) {
        const pipeline = redis.pipeline();
        for (const start of bucketStarts.slice(offset, offset + 1000)) pipeline.hgetall(`${base}usage:${start}`);
        for (const [error, fields] of (await pipeline.exec()) ?? []) {
          if (error) throw error;
          answers.push(fields as Record<string, string>);
        }
      }
      return answers;
    },
  };
}
