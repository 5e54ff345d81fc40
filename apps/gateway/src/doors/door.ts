import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AdapterDescriptor } from "@switchyard/core";
import type { NamedBackend } from "../backends.js";
import type { Config } from "../config.js";
import type { GatewayEnv } from "../errors.js";
import type { JobEvents } from "../events.js";
import type { MigrationRuns } from "../migrate/runs.js";
import type { QueueRouter } from "../router.js";
import type { Wakeups } from "../wakeups.js";
import type { QlessSettings } from "./qless-settings.js";

/** What every door is given: the router to the backends, and the configuration it answers under. */
export interface DoorContext {
  router: QueueRouter;
  backends: Map<string, NamedBackend>;
  /** Where a long poll parks, to be woken when a job may have come. */
  wakeups: Wakeups;
  /** Every job transition through this gateway, for subscribers. */
  events: JobEvents;
  config: Config;
  /** Where credentials such as TOKEN and SECRET are read. */
  env: Record<string, string | undefined>;
  adapters: readonly AdapterDescriptor[];
  /** The migrations and bridges this gateway runs. */
  migrations: MigrationRuns;
  /** qless's settings for queues on stores that are not qless-redis (the qless door and the RESP door share them). */
  qlessSettings: QlessSettings;
}

/**
 * One protocol the gateway speaks. A door registers its routes on the gateway's app (with
 * `openapi()` where they belong in /openapi.json) and talks to backends only through the router
 * and the optional interfaces of @switchyard/core; it never imports an adapter package.
 */
export interface Door {
  readonly name: string;
  mount(app: OpenAPIHono<GatewayEnv>, context: DoorContext): void;
}
