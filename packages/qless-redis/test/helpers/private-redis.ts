import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";

/**
 * A throwaway redis-server on a unix socket, private to one test file. Pub/sub channels are
 * server-wide (not per database), so tests that compare every `ql:*` message exactly need a
 * server nobody else publishes on.
 */
export interface PrivateRedis {
  socket: string;
  connect(): Redis;
  stop(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  if (spawnSync("redis-server", ["--version"]).status !== 0) {
    throw new Error("redis-server is not installed: apt-get install -y redis-server (npm test installs it)");
  }
  const dir = mkdtempSync(join(tmpdir(), "qless-private-redis-"));
  const socket = join(dir, "redis.sock");
  const child: ChildProcess = spawn(
    "redis-server",
    ["--port", "0", "--unixsocket", socket, "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", dir],
    { stdio: "ignore" },
  );
  const deadline = Date.now() + 10_000;
  while (!existsSync(socket)) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error("redis-server did not open its socket within 10s");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const clients: Redis[] = [];
  return {
    socket,
    connect() {
      const client = new Redis({ path: socket, maxRetriesPerRequest: 1 });
      clients.push(client);
      return client;
    },
    async stop() {
      for (const client of clients) client.disconnect();
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
