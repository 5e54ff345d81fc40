import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, Gauge, Registry } from "prom-client";
import type { BridgeEvent } from "./legacy-bridge.js";

/**
 * The bridge's progress for Prometheus, on a port of its own (the bridge runs apart from the
 * gateway): rows handed to the target, written back by outcome, refused, and in flight now.
 */
export class BridgeMetrics {
  readonly registry = new Registry();
  readonly #rows = new Counter({
    name: "switchyard_bridge_rows_total",
    help: "Legacy rows by step: enqueued on the target (a re-enqueue after a restart included), complete, error, refused.",
    labelNames: ["step"] as const,
    registers: [this.registry],
  });

  constructor(inFlight: () => number) {
    new Gauge({
      name: "switchyard_bridge_rows_in_flight",
      help: "Rows the bridge holds while their job runs on the target.",
      registers: [this.registry],
      collect() {
        this.set(inFlight());
      },
    });
  }

  count(event: BridgeEvent): void {
    this.#rows.inc({ step: event.type === "finished" ? event.status : event.type });
  }

  /** Serves GET /metrics on `port` (0: a free one) of `host`; resolves with the bound address. */
  async listen(port: number, host: string): Promise<{ url: string; close: () => Promise<void> }> {
    const server: Server = createServer(async (req, res) => {
      if (req.method !== "GET" || req.url !== "/metrics") {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { "Content-Type": this.registry.contentType }).end(await this.registry.metrics());
    });
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(port, host, () => resolve()));
    const { port: bound } = server.address() as AddressInfo;
    return { url: `http://${host}:${bound}/metrics`, close: () => new Promise((resolve) => server.close(() => resolve())) };
  }
}
