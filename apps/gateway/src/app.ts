import { OpenAPIHono, createRoute, z } from "@hono/zod-openapi";
import type { AdapterDescriptor } from "@switchyard/core";
import { ADAPTERS } from "./adapters.js";
import { BEARER_SCHEME, TokenAuth, requireAccess, securityOf } from "./auth.js";
import { type NamedBackend, closeBackends, openBackends } from "./backends.js";
import { type Config, ConfigError, type ConfigInput, parseConfig } from "./config.js";
import { mountDashboard } from "./dashboard/index.js";
import { withDeadline } from "./deadline.js";
import { cloudqDoor } from "./doors/cloudq.js";
import type { Door } from "./doors/door.js";
import { glidemqDoor } from "./doors/glidemq.js";
import { HealthResponse } from "./doors/native-schemas.js";
import { nativeDoor } from "./doors/native.js";
import { QlessSettings } from "./doors/qless-settings.js";
import { qlessDoor } from "./doors/qless.js";
import { workerQueueDoor } from "./doors/workerqueue.js";
import { type GatewayEnv, installErrorHandling } from "./errors.js";
import { JobEvents, observedBackend } from "./events.js";
import { GatewayMetrics } from "./metrics.js";
import { MigrationRuns } from "./migrate/runs.js";
import { QueueCounts } from "./queue-counts.js";
import { mountReference } from "./reference.js";
import { type Logger, createLogger, requestLog } from "./request-log.js";
import { QueueRouter } from "./router.js";
import { type WakeListener, listenForWakeups } from "./wake-listener.js";
import { Wakeups } from "./wakeups.js";

/** The doors of this build, mounted in this order; Cloudq last, since it may also own `/:queue`. */
export const DOORS: readonly Door[] = [nativeDoor, qlessDoor, workerQueueDoor, glidemqDoor, cloudqDoor];

export interface GatewayOptions {
  /** The configuration, shaped as the file is (defaults are filled in here). */
  config: ConfigInput | Config;
  /** The adapters backends may use; by default the ones this build ships (adapters.ts). */
  adapters?: readonly AdapterDescriptor[];
  /** Environment for TOKEN/SECRET; process.env by default. */
  env?: Record<string, string | undefined>;
  /** Where request lines and failures go; by default warnings and errors only, as JSON on stdout. */
  logger?: Logger;
}

export interface Gateway {
  app: OpenAPIHono<GatewayEnv>;
  config: Config;
  router: QueueRouter;
  backends: Map<string, NamedBackend>;
  /** The reservers parked in long polls, and what wakes them. */
  wakeups: Wakeups;
  /** The lifecycle events of the jobs on every backend. */
  events: JobEvents;
  /** The configured tokens, for doors that are not HTTP (the RESP door's AUTH). */
  auth: TokenAuth;
  /** The Worker Queue door's UDP port, when `doors.workerqueue.udp` turns it on. */
  wakeListener: WakeListener | null;
  /** qless's settings for queues on stores that are not qless-redis. */
  qlessSettings: QlessSettings;
  /** Closes every backend; safe to call twice. */
  close(): Promise<void>;
}

/** The health check reads the counts of this queue: a round trip to the store that writes nothing. */
const HEALTH_QUEUE = "switchyard-health-check";
const HEALTH_TIMEOUT_MS = 5_000;

async function checkBackend(named: NamedBackend): Promise<{ kind: string; ok: boolean; error?: string }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${HEALTH_TIMEOUT_MS} ms`)), HEALTH_TIMEOUT_MS);
  });
  try {
    await Promise.race([named.backend.counts(HEALTH_QUEUE), timeout]);
    return { kind: named.backend.kind, ok: true };
  } catch (error) {
    return { kind: named.backend.kind, ok: false, error: (error as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

const healthRoute = createRoute({
  method: "get",
  path: "/health",
  summary: "Check every backend with a read that writes nothing",
  responses: {
    200: { description: "Every backend answered", content: { "application/json": { schema: HealthResponse } } },
    503: { description: "At least one backend did not answer", content: { "application/json": { schema: HealthResponse } } },
  },
});

const metricsRoute = createRoute({
  method: "get",
  path: "/metrics",
  summary:
    "Prometheus metrics: requests, jobs, backend calls, and jobs by state per queue (counted on scrape, reused for 5 s, a large queue's longer)",
  security: securityOf("metrics"),
  responses: {
    200: { description: "Prometheus text format", content: { "text/plain": { schema: z.string() } } },
    401: { description: "Tokens are configured and the request has no known one" },
  },
});

/**
 * The OpenAPI 3.1 document of every route declared with `openapi()`, generated from the zod schemas
 * that validate them (job data is the `Json` component: any JSON value).
 */
function openApiDocument(app: OpenAPIHono<GatewayEnv>) {
  const document = app.getOpenAPI31Document({
    openapi: "3.1.0",
    info: {
      title: "Switchyard",
      version: "1",
      description:
        "Every door of the Switchyard job-queue gateway: the native REST API (/v1), qless's commands (/qless), Worker Queue (/workerqueue), glide-mq's proxy (/glidemq) and Cloudq (/cloudq). Errors answer `{error: {code, message}}`, on the Cloudq door `{status: \"error\", message}`, on the glide-mq door `{error}`.",
    },
  });
  return document;
}

/** The configured tokens, their values read from the environment or files; a missing one stops the start. */
function tokenAuth(config: Config, env: Record<string, string | undefined>): TokenAuth {
  try {
    return new TokenAuth(config.auth, env);
  } catch (error) {
    throw new ConfigError(`auth.tokens: ${(error as Error).message}`, { cause: error });
  }
}

/** Opens the configured backends and builds the Hono app with every door mounted. */
export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  const adapters = options.adapters ?? ADAPTERS;
  const env = options.env ?? process.env;
  const config = parseConfig(options.config, "config", adapters);
  const auth = tokenAuth(config, env);
  const events = new JobEvents();
  const wakeups = new Wakeups(config.longPollIntervalMs);
  wakeups.follow(events);
  const opened = await openBackends(config, adapters);
  const queueCounts = new QueueCounts();
  const metrics: GatewayMetrics = new GatewayMetrics(
    () => backends.values(),
    () => migrations.list(),
    queueCounts,
  );
  // Each call: its deadline, then timed and counted, then announced to the event subscribers.
  const backends: Map<string, NamedBackend> = new Map(
    [...opened].map(([name, named]) => {
      const timed = withDeadline(name, named.backend, named.spec.timeoutMs);
      return [name, { ...named, backend: observedBackend(name, metrics.instrument(name, timed), events) }];
    }),
  );
  const router = new QueueRouter(config.routes, backends);
  const migrations = new MigrationRuns(backends);

  const logger = options.logger ?? createLogger("warn");
  // Each store's own feed, read from the adapter itself: it is a stream of reads, not a call to time out.
  for (const [name, named] of opened)
    if (named.spec.storeEvents)
      events.follow(name, named.backend, (error) =>
        logger.warn({ backend: name, err: error.message }, "store event feed failed; retrying"),
      );
  const app = new OpenAPIHono<GatewayEnv>();
  app.use("*", requestLog(logger), metrics.middleware(), auth.middleware());
  app.openAPIRegistry.registerComponent("securitySchemes", BEARER_SCHEME, {
    type: "http",
    scheme: "bearer",
    description: "Only when `auth.tokens` are configured; each route's role is the access level it needs (metrics < read < write < admin).",
  });
  installErrorHandling(app, logger);

  let document: unknown;
  app.get("/openapi.json", (c) => {
    document ??= openApiDocument(app);
    return c.json(document);
  });
  mountReference(app);
  app.openapi(metricsRoute, async (c) => {
    requireAccess(c, "metrics", "metrics");
    return c.text(await metrics.registry.metrics(), 200, { "Content-Type": metrics.registry.contentType });
  });
  app.openapi(healthRoute, async (c) => {
    const entries = await Promise.all([...backends.values()].map(async (named) => [named.name, await checkBackend(named)] as const));
    const ok = entries.every(([, check]) => check.ok);
    return c.json({ status: ok ? ("ok" as const) : ("unavailable" as const), backends: Object.fromEntries(entries) }, ok ? 200 : 503);
  });

  const qlessSettings = new QlessSettings();
  const context = { router, backends, wakeups, events, config, env, adapters, migrations, qlessSettings };
  mountDashboard(app, context, queueCounts);
  for (const door of DOORS) door.mount(app, context);

  const udp = config.doors.workerqueue.udp;
  let wakeListener: WakeListener | null = null;
  try {
    wakeListener = udp ? await listenForWakeups(udp, () => wakeups.wakeAll()) : null;
  } catch (error) {
    await events.close();
    await closeBackends(backends);
    throw new ConfigError(`doors.workerqueue.udp: cannot listen on ${udp?.host}:${udp?.port}: ${(error as Error).message}`, {
      cause: error,
    });
  }

  let closing: Promise<void> | undefined;
  return {
    app,
    config,
    router,
    backends,
    wakeups,
    events,
    auth,
    qlessSettings,
    wakeListener,
    close: () => {
      closing ??= Promise.all([wakeListener?.close(), events.close(), migrations.close()])
        .then(() => closeBackends(backends))
        .then(() => undefined);
      return closing;
    },
  };
}
