import { type ChildProcess, spawn } from "node:child_process";
import { connect, createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Gateway, createGateway } from "../src/index.js";
import { send, until } from "./helpers.js";

/** A redis-server of this test's own, so it can be frozen (SIGSTOP) without touching other suites. */
let redis: ChildProcess;
let port: number;
let gateway: Gateway;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: chosen } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return chosen;
}

const accepts = (on: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(on, "127.0.0.1");
    socket.once("connect", () => resolve(socket.destroy() !== undefined));
    socket.once("error", () => resolve(false));
  });

beforeAll(async () => {
  port = await freePort();
  redis = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  await until(() => accepts(port), "redis-server to listen");
  gateway = await createGateway({
    config: { backends: { main: { type: "qless-redis", url: `redis://127.0.0.1:${port}/0`, timeoutMs: 300 } } },
    env: {},
  });
});
afterAll(async () => {
  redis.kill("SIGCONT");
  await gateway?.close();
  redis.kill("SIGTERM");
});

describe("a backend that stops answering", () => {
  it("answers 503 with Retry-After and the backend's name within its timeoutMs, and serves again once the store is back", async () => {
    expect((await send(gateway, "POST", "/v1/queues/frozen/jobs", { name: "before" })).status).toBe(201);

    redis.kill("SIGSTOP");
    const started = Date.now();
    const refused = await send(gateway, "POST", "/v1/queues/frozen/jobs", { name: "during" });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(refused.json.error).toMatchObject({
      code: "BACKEND_UNAVAILABLE",
      message: expect.stringContaining('backend "main" (qless-redis)'),
    });
    expect((await send(gateway, "GET", "/health")).status).toBe(503);

    redis.kill("SIGCONT");
    await until(async () => (await send(gateway, "GET", "/health")).status === 200, "the gateway to reach the store again");
    expect((await send(gateway, "POST", "/v1/queues/frozen/jobs", { name: "after" })).status).toBe(201);
  });
});
