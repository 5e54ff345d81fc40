import { type OpenAPIHono, z } from "@hono/zod-openapi";
import { type Backend, type GlideMqExtras, type GlideMqUsage, UnsupportedError, hasGlideMqExtras } from "@switchyard/core";
import { HTTPException } from "hono/http-exception";
import type { NamedBackend } from "../backends.js";
import type { GatewayEnv } from "../errors.js";
import { BACKEND_ERRORS, guarded, json } from "./declare.js";
import { extrasOf } from "./glidemq-native.js";
import * as S from "./glidemq-schemas.js";

/*
 * The AI usage glide-mq's workers report (`job.reportUsage()`) and its flow budgets, read as its
 * proxy reads them: a flow's usage (the parent and its children), a flow's budget, and the usage
 * summary over per-minute buckets of every queue that reported any.
 */

const BUCKET_MS = 60_000;
/** glide-mq keeps usage buckets 30 days; a window reaching further back starts there. */
const RETENTION_MS = 30 * 24 * 3600 * 1000;
const DEFAULT_WINDOW_MS = 3600 * 1000;
/** glide-mq's bound on one summary's reads (queues x buckets). */
const MAX_BUCKET_READS = 100_000;

const Numbers = z.record(z.string(), z.number());
const UsageFields = {
  jobCount: z.number(),
  tokens: Numbers,
  totalTokens: z.number(),
  costs: Numbers,
  totalCost: z.number(),
  costUnit: z.string().optional(),
  models: Numbers,
};
export const Usage = z.object(UsageFields).openapi("GlideUsage");
export const Budget = z
  .object({
    maxTotalTokens: z.number().optional(),
    maxTokens: Numbers.optional(),
    tokenWeights: Numbers.optional(),
    maxTotalCost: z.number().optional(),
    maxCosts: Numbers.optional(),
    costUnit: z.string().optional(),
    usedTokens: z.number(),
    usedCost: z.number(),
    exceeded: z.boolean(),
    onExceeded: z.enum(["pause", "fail"]),
  })
  .openapi("GlideBudget");
const Summary = z
  .object({
    startTime: z.number(),
    endTime: z.number(),
    bucketSizeMs: z.number(),
    queues: z.array(z.string()),
    ...UsageFields,
    perQueue: z.record(z.string(), Usage),
  })
  .openapi("GlideUsageSummary");

const queueName = S.QueueParams.shape.queue;
const SummaryQuery = z
  .object({
    queues: z
      .string()
      .optional()
      .transform((raw, ctx) => {
        const names = (raw ?? "")
          .split(",")
          .map((name) => name.trim())
          .filter(Boolean);
        for (const name of names) {
          const checked = queueName.safeParse(name);
          if (!checked.success) ctx.addIssue({ code: "custom", message: checked.error.issues[0]?.message ?? "Invalid queue name" });
        }
        return names.length > 0 ? [...new Set(names)] : undefined;
      })
      .describe("Comma-separated queue names; every queue that reported usage when absent"),
    start: S.integer("start", 0).optional(),
    end: S.integer("end", 0).optional(),
    window: S.integer("window", 1).optional(),
    windowMs: S.integer("windowMs", 1).optional(),
  })
  .refine((q) => q.window === undefined || q.windowMs === undefined || q.window === q.windowMs, {
    message: "window and windowMs must match when both are provided",
  });

const FlowParams = S.QueueParams.extend({ parentId: S.JobParams.shape.id });
const BudgetParams = S.QueueParams.extend({ flowId: S.JobParams.shape.id });
const ERRORS = S.glideErrors(...BACKEND_ERRORS);

const emptyUsage = (): GlideMqUsage => ({
  jobCount: 0,
  tokens: {},
  totalTokens: 0,
  costs: {},
  totalCost: 0,
  costUnit: undefined,
  models: {},
});

function number(raw: string | undefined): number {
  const value = raw === undefined ? 0 : Number.parseFloat(raw);
  return Number.isFinite(value) ? value : 0;
}

/** Adds a bucket's fields (jobCount, totalTokens, totalCost, costUnit, models:<m>, tokens:<k>, costs:<k>). */
function addBucket(into: GlideMqUsage, fields: Record<string, string>): void {
  into.jobCount += number(fields.jobCount);
  into.totalTokens += number(fields.totalTokens);
  into.totalCost += number(fields.totalCost);
  if (fields.costUnit && !into.costUnit) into.costUnit = fields.costUnit;
  for (const [field, raw] of Object.entries(fields)) {
    const value = number(raw);
    const [kind, ...rest] = field.split(":");
    const key = rest.join(":");
    if (value === 0 || key === "") continue;
    const target = kind === "models" ? into.models : kind === "tokens" ? into.tokens : kind === "costs" ? into.costs : undefined;
    if (target) target[key] = (target[key] ?? 0) + value;
  }
}

const hasData = (fields: Record<string, string>) =>
  Object.entries(fields).some(([field, raw]) => field !== "costUnit" && number(raw) !== 0);

/** The window glide-mq's Queue.getUsageSummary reads: its bounds and the minute buckets in it. */
function usageWindow(query: { start?: number; end?: number; window?: number; windowMs?: number }) {
  const endTime = query.end ?? Date.now();
  const requested = query.start ?? Math.max(0, endTime - (query.windowMs ?? query.window ?? DEFAULT_WINDOW_MS));
  if (requested > endTime) throw new HTTPException(400, { message: "startTime must be less than or equal to endTime" });
  const startTime = Math.max(Math.max(0, endTime - RETENTION_MS), requested);
  const buckets: number[] = [];
  const floor = (time: number) => Math.floor(time / BUCKET_MS) * BUCKET_MS;
  for (let bucket = floor(startTime); bucket <= floor(endTime); bucket += BUCKET_MS) buckets.push(bucket);
  return { startTime, endTime, buckets };
}

export function mountUsageRoutes(door: OpenAPIHono<GatewayEnv>, on: (queue: string) => Backend, backends: Map<string, NamedBackend>): void {
  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/flows/{parentId}/usage",
      summary: "The AI usage a flow's parent and its children reported",
      request: { params: FlowParams },
      responses: { 200: json("The usage", Usage), ...ERRORS },
    }),
    async (c) => {
      const { queue, parentId } = c.req.valid("param");
      const store = extrasOf(on(queue), queue, "a flow's usage");
      if (!(await store.get(queue, parentId))) throw new HTTPException(404, { message: "Job not found" });
      return c.json(await store.flowUsage(queue, parentId), 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/queues/{queue}/flows/{flowId}/budget",
      summary: "A flow's budget and what it used (404 when the flow has none)",
      request: { params: BudgetParams },
      responses: { 200: json("The budget", Budget), ...ERRORS },
    }),
    async (c) => {
      const { queue, flowId } = c.req.valid("param");
      const budget = await extrasOf(on(queue), queue, "a flow's budget").flowBudget(queue, flowId);
      if (!budget) throw new HTTPException(404, { message: "Flow budget not found" });
      return c.json(budget, 200);
    },
  );

  door.openapi(
    guarded("glidemq", "read", {
      method: "get",
      path: "/usage/summary",
      summary: "AI usage summed over a window (the last hour by default), in total and per queue",
      request: { query: SummaryQuery },
      responses: { 200: json("The summary", Summary), ...S.glideErrors(400, 404, 501, 503) },
    }),
    async (c) => {
      const query = c.req.valid("query");
      const { startTime, endTime, buckets } = usageWindow(query);
      // Each queue read from its store: the named ones where they are routed, else every queue that reported usage.
      const sources: Array<{ queue: string; store: GlideMqExtras }> = query.queues
        ? query.queues.map((queue) => ({ queue, store: extrasOf(on(queue), queue, "the usage summary") }))
        : await everyReportingQueue(backends);
      const total = {
        startTime,
        endTime,
        bucketSizeMs: BUCKET_MS,
        queues: [] as string[],
        ...emptyUsage(),
        perQueue: {} as Record<string, GlideMqUsage>,
      };
      if (sources.length > 0 && sources.length * buckets.length > MAX_BUCKET_READS) {
        const reads = sources.length * buckets.length;
        throw new HTTPException(400, {
          message: `usage summary request exceeds maximum bucket reads (${reads} > ${MAX_BUCKET_READS}); reduce queues or windowMs`,
        });
      }
      for (const { queue, store } of sources) {
        for (const fields of await store.usageBuckets(queue, buckets)) {
          if (!hasData(fields)) continue;
          total.perQueue[queue] ??= emptyUsage();
          addBucket(total, fields);
          addBucket(total.perQueue[queue], fields);
        }
      }
      total.queues = Object.keys(total.perQueue).sort();
      return c.json(total, 200);
    },
  );
}

/** Every queue that reported usage, on every store in glide-mq's layout; a 501 when there is none. */
async function everyReportingQueue(backends: Map<string, NamedBackend>): Promise<Array<{ queue: string; store: GlideMqExtras }>> {
  const stores = [...backends.values()].map((named) => named.backend);
  const glide = stores.filter(hasGlideMqExtras);
  if (glide.length === 0)
    throw new UnsupportedError(`the usage summary is glide-mq's own; this gateway's backends are ${stores.map((s) => s.kind).join(", ")}`);
  const found = await Promise.all(glide.map(async (store) => (await store.usageQueues()).sort().map((queue) => ({ queue, store }))));
  return found.flat();
}
