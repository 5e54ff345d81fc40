import { type Socket, createSocket } from "node:dgram";
import { isIP } from "node:net";

/**
 * A legacy master to wake when jobs become runnable. The masters sleep between polls (workqd's idle
 * timer grows toward 64 s, 600 s in its sample config) and are woken by UDP datagrams:
 * - `workq`: workqd reads one byte per datagram and schedules one unit of work per datagram, so
 *   N jobs are announced with N datagrams (payload ignored; its own test client sends `1`);
 * - `rjqueue`: the Ruby master counts bytes, `s` per standard job, so N jobs fit in one datagram.
 */
export interface LegacyMaster {
  host: string;
  port: number;
  kind: "workq" | "rjqueue";
}

/** Default ports of the two masters (workq's `listen`, rjqueue's `port`). */
export const DEFAULT_MASTER_PORTS = { workq: 4488, rjqueue: 4321 } as const;

/**
 * workqd reads `max_scheduled_per_idle` (64) as its cap of units per wake-up; more datagrams in one
 * burst would only queue in its socket buffer, so a flush announces at most this many jobs.
 */
export const MAX_UNITS_PER_FLUSH = 64;

/**
 * Sends the wake-up datagrams after committed enqueues. Enqueues that finish in the same turn of the
 * event loop are announced together (coalesced), and a datagram that cannot be sent never fails the
 * enqueue: the masters' idle poll still finds the job, only later.
 */
export class MasterWaker {
  private pendingUnits = 0;
  private scheduled = false;
  private readonly sockets = new Map<4 | 6, Socket>();

  constructor(
    private readonly masters: readonly LegacyMaster[],
    private readonly onError: (error: Error, master: LegacyMaster) => void = () => {},
  ) {}

  /** Announces `units` new runnable jobs to every master, once the current turn ends. */
  wake(units = 1): void {
    if (this.masters.length === 0 || units <= 0) return;
    this.pendingUnits += units;
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  async close(): Promise<void> {
    const sockets = [...this.sockets.values()];
    this.sockets.clear();
    await Promise.all(sockets.map((socket) => new Promise<void>((resolve) => socket.close(() => resolve()))));
  }

  private flush(): void {
    const units = Math.min(this.pendingUnits, MAX_UNITS_PER_FLUSH);
    this.pendingUnits = 0;
    this.scheduled = false;
    for (const master of this.masters) {
      const payloads = master.kind === "rjqueue" ? [Buffer.from("s".repeat(units))] : Array.from({ length: units }, () => Buffer.from("1"));
      for (const payload of payloads) this.send(master, payload);
    }
  }

  private send(master: LegacyMaster, payload: Buffer): void {
    const family = isIP(master.host) === 6 ? 6 : 4;
    let socket = this.sockets.get(family);
    if (!socket) {
      socket = createSocket(family === 6 ? "udp6" : "udp4");
      // A wake-up is best effort: an unreachable master (ICMP port unreachable) is reported, not thrown.
      socket.on("error", (error) => this.onError(error, master));
      socket.unref();
      this.sockets.set(family, socket);
    }
    socket.send(payload, master.port, master.host, (error) => {
      if (error) this.onError(error, master);
    });
  }
}

/**
 * Reads a master from the config file's shorthand: `host:port` (workq), `rjqueue://host:port`, or
 * `workq://host` (default port). IPv6 hosts go in brackets: `[::1]:4488`.
 */
export function parseLegacyMaster(text: string): LegacyMaster {
  const match = /^(?:(workq|rjqueue):\/\/)?(\[[^\]]+\]|[^:/[\]]+)(?::(\d{1,5}))?$/.exec(text.trim());
  if (!match) throw new Error(`"${text}" is not a master address (host:port, workq://host:port or rjqueue://host:port)`);
  const kind = (match[1] ?? "workq") as LegacyMaster["kind"];
  const host = (match[2] as string).replace(/^\[|\]$/g, "");
  const port = match[3] === undefined ? DEFAULT_MASTER_PORTS[kind] : Number(match[3]);
  if (port < 1 || port > 65_535) throw new Error(`"${text}": port ${port} is out of range`);
  return { host, port, kind };
}
