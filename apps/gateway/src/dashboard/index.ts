import type { OpenAPIHono } from "@hono/zod-openapi";
import type { DoorContext } from "../doors/door.js";
import type { GatewayEnv } from "../errors.js";
import type { QueueCounts } from "../queue-counts.js";
import { mountDashboardApi } from "./api.js";
import { mountAssets } from "./assets.js";
import { Throughput } from "./throughput.js";

/**
 * The web dashboard at /dashboard: a single-page app (dashboard/src, built into dashboard/dist) that
 * reads the /v1 API with the user's token, and the few /v1 routes it needs besides the door's own.
 * Mounted before the doors, since a Cloudq door at `/` would take `/dashboard` for a queue name.
 */
export function mountDashboard(
  app: OpenAPIHono<GatewayEnv>,
  { router, backends, config, events }: DoorContext,
  queueCounts: QueueCounts,
): void {
  const throughput = new Throughput(events);
  mountDashboardApi(app, { router, backends, config, throughput, queueCounts });
  mountAssets(app);
}
