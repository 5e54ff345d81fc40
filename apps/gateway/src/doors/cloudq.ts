import { createHash, timingSafeEqual } from "node:crypto";
import { type OpenAPIHono, type RouteConfig, z } from "@hono/zod-openapi";
import { type AdapterDescriptor, type Backend, InvalidStateError, JobIdSchema, NotFoundError, QueueNameSchema } from "@switchyard/core";
import { Hono, type MiddlewareHandler } from "hono";
import type { ZodType } from "zod";
import { type Access, needs, securityOf } from "../auth.js";
import type { CloudqDoorConfig } from "../config.js";
import type { GatewayEnv } from "../errors.js";
import { clientGone, errorFormat, limitBody } from "../http.js";
import type { QueueRouter } from "../router.js";
import type { Wakeups } from "../wakeups.js";
import {
  CLOUDQ_WORKER,
  CloudqError,
  CloudqStats,
  CloudqStatus,
  PublishBody,
  ReservedJob,
  publishInput,
  reservedBody,
} from "./cloudq-protocol.js";
import { body as bodyOf, declaredDoor, route } from "./declare.js";
import type { Door } from "./door.js";

function sameSecret(given: string, expected: string): boolean {
  const digest = (value: string) => createHash("sha256").update(value).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

const UNAUTHORIZED = new TextEncoder().encode("Unauthorized");

/** node-cloudq 2.x basic auth: on only when both token and secret are set; 401 as connect answers it. */
function basicAuth(token: string | null, secret: string | null): MiddlewareHandler<GatewayEnv> {
  return async (c, next) => {
    // Bearer tokens, when configured, replace the token/secret pair (a Cloudq client sends its token as the basic password).
    if (token === null || secret === null || c.get("authEnabled")) return next();
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
  /** Bearer tokens are configured: they guard the door instead of `token`/`secret`. */
  tokens: boolean;
}

/** The door's JSON bodies and path parameters for /openapi.json. */
const body = (description: string, schema: ZodType) => ({ description, content: { "application/json": { schema } } });
const QueueParam = z.object({ queue: QueueNameSchema.describe("The queue; `stats` is the stats route, as on the Cloudq servers.") });
const JobParams = QueueParam.extend({ id: JobIdSchema.describe("The `id` the GET answered.") });
const REFUSED = {
  400: body("Bad input, in the Cloudq servers' words (`klass key required`)", CloudqError),
  404: body("No such job in that queue, or no route for the queue", CloudqError),
  501: body("The queue's backend cannot honour this", CloudqError),
  503: body("The queue's backend is unavailable", CloudqError),
};

/** The Cloudq door (spec §1, §4.4): POST/PUT publish, GET reserve, DELETE finish, GET /stats. */
export function createCloudqDoor(
  router: QueueRouter,
  { config, env, adapters, wakeups, tokens }: CloudqDoorOptions,
): OpenAPIHono<GatewayEnv> {
  // The first issue alone: Cloudq clients get the servers' short texts.
  const door = declaredDoor((error) => error.issues[0]?.message ?? "invalid request");
  const cloudq = errorFormat("cloudq");
  const auth = basicAuth(config.token ?? env.TOKEN ?? null, config.secret ?? env.SECRET ?? null);
  const legacyAuth = !tokens && (config.token ?? env.TOKEN) != null && (config.secret ?? env.SECRET) != null;
  if (legacyAuth) door.openAPIRegistry.registerComponent("securitySchemes", "cloudqBasic", { type: "http", scheme: "basic" });
  /** A route's security in the document: the token level it needs, or the token/secret pair. */
  const security = (access: Access) => (tokens ? securityOf(access) : legacyAuth ? [{ cloudqBasic: [] }] : []);
  const unauthorized: RouteConfig["responses"] =
    tokens || legacyAuth
      ? {
          401: { description: "Missing or wrong credentials" },
          ...(tokens ? { 403: body("The token lacks the access, door or queue this needs", CloudqError) } : {}),
        }
      : {};

  // Middleware per route rather than door.use("*"): mounted at `/`, a catch-all would also wrap /v1.
  door.openapi(
    route({
      method: "get",
      path: "/stats",
      summary: "Jobs per queue: published (waiting), consumed (reserved), complete",
      middleware: [cloudq, needs("cloudq", "read")],
      security: security("read"),
      responses: { 200: body("One entry per queue", CloudqStats), ...unauthorized },
    }),
    async (c) => {
      const stats = [];
      for (const { name } of await router.queues()) {
        const counts = await router.backendFor(name).counts(name);
        const published = counts.waiting + counts.delayed + counts.blocked;
        stats.push({ key: name, value: { published, consumed: counts.active, complete: counts.completed } });
      }
      return c.json(stats, 200);
    },
  );

  for (const method of ["post", "put"] as const) {
    door.openapi(
      route({
        method,
        path: "/{queue}",
        summary: method === "post" ? "Publish a job" : "Publish a job (as POST)",
        middleware: [cloudq, needs("cloudq", "write"), auth, limitBody, ...bodyOf(PublishBody).middleware],
        security: security("write"),
        request: { params: QueueParam, body: bodyOf(PublishBody).body },
        responses: {
          200: body("Published", CloudqStatus),
          ...unauthorized,
          ...REFUSED,
          413: body("The body is larger than 1 MiB", CloudqError),
        },
      }),
      async (c) => {
        const { queue } = c.req.valid("param");
        await router.backendFor(queue).enqueue(queue, publishInput(c.req.valid("json")));
        return c.json({ status: "success" as const }, 200);
      },
    );
  }

  door.openapi(
    route({
      method: "get",
      path: "/{queue}",
      summary: "Reserve the next job, waiting up to `longPollMs` for one",
      middleware: [cloudq, needs("cloudq", "write"), auth],
      security: security("write"),
      request: { params: QueueParam },
      responses: { 200: body("The job, or `{status: empty}`", z.union([ReservedJob, CloudqStatus])), ...unauthorized, ...REFUSED },
    }),
    async (c) => {
      const { queue } = c.req.valid("param");
      const backend = router.backendFor(queue);
      const reserve = async () => (await backend.reserve(queue, { worker: CLOUDQ_WORKER, count: 1, leaseMs: config.leaseMs }))[0];
      const job = await wakeups.reserveWaiting(queue, reserve, config.longPollMs, clientGone(c));
      return c.json(job ? reservedBody(job, adapters) : { status: "empty" }, 200);
    },
  );

  door.openapi(
    route({
      method: "delete",
      path: "/{queue}/{id}",
      summary: "Finish a job: complete it if reserved, cancel it if waiting",
      middleware: [cloudq, needs("cloudq", "write"), auth],
      security: security("write"),
      request: { params: JobParams },
      responses: {
        200: body("Finished", CloudqStatus),
        ...unauthorized,
        ...REFUSED,
        409: body("The job keeps changing state", CloudqError),
      },
    }),
    async (c) => {
      const { queue, id } = c.req.valid("param");
      await finish(router.backendFor(queue), queue, id);
      return c.json({ status: "success" as const }, 200);
    },
  );

  return door;
}

/** The Cloudq door at `/cloudq`, and also at `/` when `doors.cloudq.mountAtRoot` says so. */
export const cloudqDoor: Door = {
  name: "cloudq",
  mount(app, { router, config, env, adapters, wakeups }) {
    const tokens = config.auth.tokens.length > 0;
    const door = createCloudqDoor(router, { config: config.doors.cloudq, env, adapters, wakeups, tokens });
    app.route("/cloudq", door);
    // At `/` through a plain Hono app: the same routes, described once (under /cloudq) in the document.
    if (config.doors.cloudq.mountAtRoot) app.route("/", new Hono<GatewayEnv>().route("/", door));
  },
};
