import { createHash, timingSafeEqual } from "node:crypto";
import {
  type AdapterDescriptor,
  type Backend,
  type EnqueueInput,
  InvalidStateError,
  type Job,
  type Json,
  NotFoundError,
  ValidationError,
  producerExtras,
} from "@switchyard/core";
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { z } from "zod";
import type { CloudqDoorConfig } from "../config.js";
import type { GatewayEnv } from "../errors.js";
import { errorFormat, limitBody, readJson } from "../http.js";
import type { QueueRouter } from "../router.js";
import type { Wakeups } from "../wakeups.js";
import type { Door } from "./door.js";

/** The lease holder of jobs reserved through this door; Cloudq's DELETE completes without naming one. */
export const CLOUDQ_WORKER = "cloudq";

/** node-cloudq 2.x: priorities 1..100, lower first, default 100. Core: larger first, default 0. */
const CLOUDQ_DEFAULT_PRIORITY = 100;
/**
 * Core priorities are whole numbers, Cloudq's need not be (1.5 runs between 1 and 2), so Cloudq
 * priority p maps to core `round((100 - p) * 1000)`: in order to a thousandth, default still 0.
 */
const CLOUDQ_PRIORITY_SCALE = 1000;

export function corePriority(cloudqPriority: number): number {
  return Math.round((CLOUDQ_DEFAULT_PRIORITY - cloudqPriority) * CLOUDQ_PRIORITY_SCALE);
}

/** Keys the GET answer sets itself; a job's native fields of the same name must not shadow them. */
const RESERVED_KEYS = new Set(["klass", "args", "id", "job", "status", "ok"]);

const PlainObject = z.record(z.string(), z.unknown(), { message: "job object required" });

/** A Cloudq job: `klass` and `args` as the servers require them; every other key travels with the job. */
const CloudqJob = z.looseObject({
  klass: z.string({ message: "klass key required" }).min(1, "klass key required"),
  args: z.custom<Json>((value) => value !== undefined, "args key required"),
});

const PRIORITY_RANGE = "priority must be a number from 1 (first) to 100 (last)";

/** node-cloudq 2.x stores `priority || 100`: 0 and null are the default, as is no priority at all. */
const CloudqPriority = z.preprocess(
  (value) => (value === 0 || value === null ? undefined : value),
  z.number({ message: PRIORITY_RANGE }).min(1, PRIORITY_RANGE).max(100, PRIORITY_RANGE).optional(),
);

/** zod's first message alone: Cloudq clients get the servers' short texts (`klass key required`). */
function parseCloudq<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ValidationError(parsed.error.issues[0]?.message ?? "invalid job");
  return parsed.data;
}

/**
 * Reads a publish body the ways real clients send it: `{"job":{klass,args}, priority?}` (the
 * protocol and every client library) or the bare `{klass,args}` of the protocol's curl example.
 */
export function publishInput(body: unknown): EnqueueInput {
  const envelope = parseCloudq(PlainObject, body);
  // node-cloudq reads `priority` beside `job`; in the bare form that is the job object itself.
  const bare = !("job" in envelope) && "klass" in envelope;
  const { klass, args, ...rest } = parseCloudq(CloudqJob, parseCloudq(PlainObject, bare ? envelope : envelope.job));
  const cloudqPriority = parseCloudq(CloudqPriority, bare ? rest.priority : envelope.priority);
  const extra = Object.fromEntries(Object.entries(rest).filter(([key]) => !(bare && key === "priority")));
  const input: EnqueueInput = { name: klass, data: Array.isArray(args) ? args : [args] };
  if (cloudqPriority !== undefined) input.priority = corePriority(cloudqPriority);
  if (Object.keys(extra).length > 0) input.native = extra;
  return input;
}

/** The GET answer: the job's fields at the top level as the real servers send them, and the protocol text's `job` wrapper. */
export function reservedBody(job: Job, adapters: readonly AdapterDescriptor[]): Record<string, unknown> {
  const args = Array.isArray(job.data) ? job.data : [job.data];
  const extras = Object.fromEntries(Object.entries(producerExtras(job.native, adapters)).filter(([key]) => !RESERVED_KEYS.has(key)));
  return { ...extras, klass: job.name, args, id: job.id, job: { klass: job.name, args, id: job.id } };
}

function sameSecret(given: string, expected: string): boolean {
  const digest = (value: string) => createHash("sha256").update(value).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

const UNAUTHORIZED = new TextEncoder().encode("Unauthorized");

/** node-cloudq 2.x basic auth: on only when both token and secret are set; 401 as connect answers it. */
function basicAuth(token: string | null, secret: string | null): MiddlewareHandler<GatewayEnv> {
  return async (c, next) => {
    if (token === null || secret === null) return next();
    const header = c.req.header("authorization") ?? "";
    const match = /^Basic\s+(\S+)$/i.exec(header);
    const decoded = match ? Buffer.from(match[1]!, "base64").toString("utf8") : "";
    const colon = decoded.indexOf(":");
    const user = colon >= 0 ? decoded.slice(0, colon) : "";
    const password = colon >= 0 ? decoded.slice(colon + 1) : "";
    const userOk = sameSecret(user, token);
    const passwordOk = sameSecret(password, secret);
    if (match && userOk && passwordOk) return next();
    // connect's basicAuth, which node-cloudq 2.x uses: its default realm, the text, and no Content-Type
    // (bytes, since a string body would get text/plain from the Response constructor).
    return c.body(UNAUTHORIZED, 401, { "WWW-Authenticate": 'Basic realm="Authorization Required"' });
  };
}

/**
 * Finishes a job whatever its state, as a Cloudq DELETE does: an active job completes, a waiting one
 * is canceled, a finished one stays as it is. A state change between read and write is retried.
 */
async function finish(backend: Backend, queue: string, id: string): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const job = await backend.get(queue, id);
    if (!job) throw new NotFoundError(`job ${id} not found in queue ${queue}`);
    try {
      if (job.state === "active") await backend.complete(queue, id);
      else if (job.state === "waiting" || job.state === "delayed" || job.state === "blocked") await backend.cancel(queue, id);
      return;
    } catch (error) {
      if (!(error instanceof InvalidStateError)) throw error;
    }
  }
  throw new InvalidStateError(`job ${id} in queue ${queue} keeps changing state; try again`);
}

export interface CloudqDoorOptions {
  config: CloudqDoorConfig;
  /** Where TOKEN and SECRET are read when the config leaves them null. */
  env: Record<string, string | undefined>;
  /** Whose native keys are the adapters' own, not a producer's extras to hand back. */
  adapters: readonly AdapterDescriptor[];
  /** Where a GET waiting out `longPollMs` parks until a job may have come. */
  wakeups: Wakeups;
}

/** The Cloudq door (spec §1, §4.4): POST/PUT publish, GET reserve, DELETE finish, GET /stats. */
export function createCloudqDoor(router: QueueRouter, { config, env, adapters, wakeups }: CloudqDoorOptions): Hono<GatewayEnv> {
  const door = new Hono<GatewayEnv>();
  const cloudq = errorFormat("cloudq");
  const auth = basicAuth(config.token ?? env.TOKEN ?? null, config.secret ?? env.SECRET ?? null);

  // Registered per route rather than with door.use("*"): mounted at `/`, a catch-all middleware would also wrap /v1.
  door.get("/stats", cloudq, async (c) => {
    const stats = [];
    for (const { name } of await router.queues()) {
      const counts = await router.backendFor(name).counts(name);
      const published = counts.waiting + counts.delayed + counts.blocked;
      stats.push({ key: name, value: { published, consumed: counts.active, complete: counts.completed } });
    }
    return c.json(stats);
  });

  const publish = async (c: Context<GatewayEnv>) => {
    const queue = c.req.param("queue")!;
    const backend = router.backendFor(queue);
    const input = publishInput(await readJson(c));
    await backend.enqueue(queue, input);
    return c.json({ status: "success" });
  };
  door.post("/:queue", cloudq, auth, limitBody, publish);
  door.put("/:queue", cloudq, auth, limitBody, publish);

  door.get("/:queue", cloudq, auth, async (c) => {
    const queue = c.req.param("queue");
    const backend = router.backendFor(queue);
    const reserve = async () => (await backend.reserve(queue, { worker: CLOUDQ_WORKER, count: 1, leaseMs: config.leaseMs }))[0];
    const job = await wakeups.reserveWaiting(queue, reserve, config.longPollMs, c.req.raw.signal);
    return c.json(job ? reservedBody(job, adapters) : { status: "empty" });
  });

  door.delete("/:queue/:id", cloudq, auth, async (c) => {
    const { queue, id } = c.req.param();
    await finish(router.backendFor(queue), queue, id);
    return c.json({ status: "success" });
  });

  return door;
}

/** The Cloudq door at `/cloudq`, and also at `/` when `doors.cloudq.mountAtRoot` says so. */
export const cloudqDoor: Door = {
  name: "cloudq",
  mount(app, { router, config, env, adapters, wakeups }) {
    const door = createCloudqDoor(router, { config: config.doors.cloudq, env, adapters, wakeups });
    app.route("/cloudq", door);
    if (config.doors.cloudq.mountAtRoot) app.route("/", door);
  },
};
