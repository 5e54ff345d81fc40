import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it, vi } from "vitest";
import { createGlideMqBackend } from "../src/index.js";

/** A loopback port nothing listens on: the OS hands out a free one, and we close it again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== "object" || address === null) throw new Error("no port was assigned");
  return address.port;
}

describe("glidemq-valkey: the connection the Backend owns", () => {
  it("a failed ready() is a BackendUnavailableError, and leaves no client reconnecting or printing unhandled error events", async () => {
    const port = await closedPort();
    const printed: string[] = [];
    const consoleError = vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
      printed.push(args.map(String).join(" "));
    });
    let connectAttempts = 0;
    try {
      const backend = createGlideMqBackend({
        url: `redis://127.0.0.1:${port}`,
        // ioredis's own default strategy, counted: every call is one more reconnection attempt.
        redisOptions: {
          retryStrategy: (times: number) => {
            connectAttempts++;
            return Math.min(times * 50, 2000);
          },
        },
      });
      const started = Date.now();
      await expect(backend.ready()).rejects.toMatchObject({ name: "BackendUnavailableError", code: "BACKEND_UNAVAILABLE" });
      expect(Date.now() - started).toBeLessThan(5000);
      await backend.close();
      const attemptsAtClose = connectAttempts;
      await sleep(1500); // several of ioredis's reconnection intervals (50, 100, 150, 200 ms...)
      expect(connectAttempts).toBe(attemptsAtClose);
      expect(printed.filter((line) => line.includes("Unhandled error event"))).toEqual([]);
    } finally {
      consoleError.mockRestore();
    }
  });
});
