import type { AdapterDescriptor } from "@switchyard/core";
import { Hono } from "hono";
import { ADAPTERS } from "./adapters.js";
import { type NamedBackend, closeBackends, openBackends } from "./backends.js";
import { type Config, type ConfigInput, parseConfig } from "./config.js";
import { renderDocsPage } from "./docs.js";
import { createCloudqDoor } from "./doors/cloudq.js";
import { createNativeDoor, nativeRoutes } from "./doors/native.js";
import { createQlessDoor } from "./doors/qless.js";
import { type GatewayEnv, installErrorHandling } from "./errors.js";
import { openApiDocument } from "./openapi.js";
import { QueueRouter } from "./router.js";

export interface GatewayOptions {
  /** The configuration, shaped as the file is (defaults are filled in here). */
  config: ConfigInput | Config;
  /** The adapters backends may use; by default the ones this build ships (adapters.ts). */
  adapters?: readonly AdapterDescriptor[];
  /** Environment for TOKEN/SECRET; process.env by default. */
  env?: Record<string, string | undefined>;
}

export interface Gateway {
  app: Hono<GatewayEnv>;
  config: Config;
  router: QueueRouter;
  backends: Map<string, NamedBackend>;
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

/** Opens the configured backends and builds the Hono app with every door mounted. */
export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  const adapters = options.adapters ?? ADAPTERS;
  const config = parseConfig(options.config, "config", adapters);
  const backends = await openBackends(config, adapters);
  const router = new QueueRouter(config.routes, backends);
  const env = options.env ?? process.env;

  const app = new Hono<GatewayEnv>();
  installErrorHandling(app);

  const document = openApiDocument(nativeRoutes(router));
  const docsPage = renderDocsPage(document);
  app.get("/openapi.json", (c) => c.json(document));
  app.get("/docs", (c) => c.html(docsPage));
  app.get("/health", async (c) => {
    const entries = await Promise.all([...backends.values()].map(async (named) => [named.name, await checkBackend(named)] as const));
    const ok = entries.every(([, check]) => check.ok);
    return c.json({ status: ok ? "ok" : "unavailable", backends: Object.fromEntries(entries) }, ok ? 200 : 503);
  });

  app.route("/v1", createNativeDoor(router));
  app.route("/qless", createQlessDoor(router, backends));
  const cloudq = createCloudqDoor(router, { config: config.doors.cloudq, env, adapters });
  app.route("/cloudq", cloudq);
  // Last, so /v1, /health, /docs and /openapi.json keep their meaning when Cloudq also owns `/:queue`.
  if (config.doors.cloudq.mountAtRoot) app.route("/", cloudq);

  let closing: Promise<void> | undefined;
  return {
    app,
    config,
    router,
    backends,
    close: () => {
      closing ??= closeBackends(backends);
      return closing;
    },
  };
}
