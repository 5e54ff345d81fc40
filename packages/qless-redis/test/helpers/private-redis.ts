import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { type QlessBackend, createQlessBackend } from "../../src/index.js";

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

/**
 * A private server, a client on it and a qless backend over that client, for the test file that
 * calls this at its top level; read them inside tests (they exist once beforeAll ran).
 */
export function usePrivateQless(): { readonly redis: Redis; readonly backend: QlessBackend } {
  let server: PrivateRedis | undefined;
  let redis: Redis | undefined;
  let backend: QlessBackend | undefined;
  beforeAll(async () => {
    server = await startPrivateRedis();
    redis = server.connect();
    backend = createQlessBackend({ redis });
    await backend.ready();
  });
  afterAll(async () => {
    await backend?.close();
    await server?.stop();
  });
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("usePrivateQless: used before beforeAll ran");
    return value;
  };
  return {
    get redis() {
      return ready(redis);
    },
    get backend() {
      return ready(backend);
    },
  };
}
