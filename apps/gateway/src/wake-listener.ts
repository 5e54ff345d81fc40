import { type Socket, createSocket } from "node:dgram";

/** The UDP port workqd listens on for its wake-ups (spec §4.1). */
export const WORKQ_WAKE_PORT = 4488;

export interface WakeListener {
  /** The bound port (the configured one, or the one the system chose for port 0). */
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Listens for the datagrams a legacy producer sends after its INSERT, as workqd's master does: the
 * payload is ignored (workqd reads one byte and discards it), so any datagram, empty, garbage or
 * oversized, only calls `wake`. Wakes that come while the reservers are still looking are absorbed.
 */
export async function listenForWakeups(options: { host: string; port: number }, wake: () => void): Promise<WakeListener> {
  const socket: Socket = createSocket({ type: options.host.includes(":") ? "udp6" : "udp4" });
  socket.on("message", () => wake());
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(options.port, options.host, () => {
      socket.off("error", reject);
      resolve();
    });
  });
  // A receive error (an ICMP report on some systems) must not take the gateway down.
  socket.on("error", () => undefined);
  return {
    port: socket.address().port,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}
