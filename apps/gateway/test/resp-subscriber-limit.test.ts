import { mkdtempSync, rmSync } from "node:fs";
import { type Socket, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";
import { until } from "./helpers.js";

/**
 * The RESP door's limit on what waits to be sent to a subscriber (`doors.resp.pubsubOutputLimitBytes`,
 * Redis's `client-output-buffer-limit pubsub`): a subscriber that stops reading is disconnected once
 * more than the limit waits for it, while one that reads gets every message. Job events are told on
 * `ql:log` as qless's puts, emitted here straight into the gateway's event hub.
 */
const LIMIT = 1024 * 1024;
let dir: string;
let server: RunningServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-resp-limit-"));
  server = await startServer({
    config: {
      backends: { main: { type: "workerqueue-sql", url: `sqlite:${join(dir, "door.sqlite")}` } },
      doors: { resp: { port: 0, pubsubOutputLimitBytes: LIMIT } },
    },
    port: 0,
    host: "127.0.0.1",
    env: {},
  });
});
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A raw connection subscribed to `ql:log` that then stops reading; resolves once subscribed. */
async function stalledSubscriber(): Promise<{ socket: Socket; closed: () => boolean }> {
  const socket = connect(server.respPort as number, "127.0.0.1");
  let closed = false;
  socket.on("close", () => {
    closed = true;
  });
  socket.on("error", () => {});
  await new Promise<void>((resolve) => {
    socket.once("data", () => resolve());
    socket.write("*2\r\n$9\r\nSUBSCRIBE\r\n$6\r\nql:log\r\n");
  });
  socket.pause();
  return { socket, closed: () => closed };
}

describe("RESP door: a subscriber that does not read", () => {
  it("is disconnected once more than pubsubOutputLimitBytes wait for it; a subscriber that reads gets every message", async () => {
    const stalled = await stalledSubscriber();
    const reading = new Redis({ port: server.respPort as number, host: "127.0.0.1", maxRetriesPerRequest: 0 });
    let heard = 0;
    reading.on("message", () => heard++);
    await reading.subscribe("ql:log");

    // 200 bursts of 1,000 puts told on ql:log (about 90 bytes each on the wire, 18 MB in all): the
    // kernel's socket buffers take the first megabytes, then the door's own buffer grows.
    let sent = 0;
    for (let burst = 0; burst < 200; burst++) {
      for (let i = 0; i < 1_000; i++) server.gateway.events.emit("enqueued", "main", "limited", `j${sent++}`);
      await new Promise((resolve) => setImmediate(resolve));
    }
    // A paused socket learns it was closed only when it reads again.
    stalled.socket.resume();
    await until(() => stalled.closed(), "the stalled subscriber to be disconnected", 10_000);
    // Cut off well before all was sent to it: it was not held until the end.
    expect(stalled.socket.bytesRead).toBeLessThan(sent * 60);

    await until(() => heard === sent, "every message at the reading subscriber", 30_000);
    expect(heard).toBe(sent);
    expect(reading.status).toBe("ready");
    reading.disconnect();
    stalled.socket.destroy();
  }, 60_000);
});
