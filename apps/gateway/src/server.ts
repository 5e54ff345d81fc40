import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type Gateway, type GatewayOptions, createGateway } from "./app.js";
import { DEFAULT_HOST, DEFAULT_PORT } from "./config.js";
import { createLogger } from "./request-log.js";
import { type RunningRespServer, startRespServer } from "./resp/server.js";

export interface ServerOptions extends GatewayOptions {
  /** 0 picks a free port. */
  port?: number;
  host?: string;
  /** After this long, connections still open at shutdown are cut; default 10 s. */
  shutdownTimeoutMs?: number;
}

export interface RunningServer {
  gateway: Gateway;
  /** e.g. http://127.0.0.1:8080 */
  url: string;
  port: number;
  /** The RESP door's port, when `doors.resp.port` turns it on. */
  respPort: number | null;
  /** Requests received and not yet answered. */
  inFlight(): number;
  /** Stops accepting connections, lets in-flight requests finish, then closes every backend. */
  close(): Promise<void>;
}

/** Serves a gateway over HTTP with @hono/node-server. */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const gateway = await createGateway(options);
  let inFlight = 0;
  const fetch = async (request: Request, env: unknown) => {
    inFlight++;
    try {
      return await gateway.app.fetch(request, env);
    } finally {
      inFlight--;
    }
  };

  let server: Server;
  try {
    server = await new Promise<Server>((resolve, reject) => {
      const created = serve({ fetch, port: options.port ?? DEFAULT_PORT, hostname: options.host ?? DEFAULT_HOST }, () =>
        resolve(created as Server),
      );
      created.once("error", reject);
    });
  } catch (error) {
    await gateway.close();
    throw error;
  }
  // Idle keep-alive connections stay open longer than a load balancer's (60 s on most), so the gateway
  // never closes one under a request a client or balancer is just sending on it (Node's default is 5 s).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  const { resp } = gateway.config.doors;
  let respServer: RunningRespServer | null = null;
  try {
    if (resp.port !== null)
      respServer = await startRespServer(gateway, {
        port: resp.port,
        host: resp.host,
        logger: options.logger ?? createLogger("warn"),
        pubsubOutputLimit: resp.pubsubOutputLimitBytes,
      });
  } catch (error) {
    server.close();
    await gateway.close();
    throw error;
  }

  const { port } = server.address() as AddressInfo;
  const host = options.host ?? DEFAULT_HOST;
  const shownHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;

  let closing: Promise<void> | undefined;
  const shutdown = async () => {
    const closed = new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    // Keep-alive connections that turn idle after their last answer are dropped as soon as they do.
    const sweeper = setInterval(() => server.closeIdleConnections(), 50);
    const deadline = setTimeout(() => server.closeAllConnections(), options.shutdownTimeoutMs ?? 10_000);
    try {
      await Promise.all([closed, respServer?.close()]);
    } finally {
      clearInterval(sweeper);
      clearTimeout(deadline);
      await gateway.close();
    }
  };

  return {
    gateway,
    url: `http://${shownHost}:${port}`,
    port,
    respPort: respServer?.port ?? null,
    inFlight: () => inFlight,
    close: () => {
      closing ??= shutdown();
      return closing;
    },
  };
}
