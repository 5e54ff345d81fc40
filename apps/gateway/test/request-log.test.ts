import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../src/cli.js";
import { type ConfigInput, type Gateway, createGateway } from "../src/index.js";
import { type LogLevel, createLogger } from "../src/request-log.js";
import { send } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "switchyard-log-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A gateway on its own SQLite file whose log lines are kept, parsed, for the test to read. */
async function loggedGateway(
  level: LogLevel,
  auth?: ConfigInput["auth"],
): Promise<{ gateway: Gateway; lines: () => Array<Record<string, unknown>>; raw: () => string }> {
  const stream = new PassThrough();
  let raw = "";
  stream.on("data", (chunk) => {
    raw += chunk;
  });
  const config: ConfigInput = {
    backends: { main: { type: "workerqueue-sql", url: `sqlite:${join(dir, `${level}-${Date.now()}.sqlite`)}` } },
    auth,
  };
  const gateway = await createGateway({ config, env: {}, logger: createLogger(level, stream) });
  const lines = () =>
    raw
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { gateway, lines, raw: () => raw };
}

describe("request log", () => {
  it("one JSON line per request with its id (answered in X-Request-Id), door, route, queue, status and duration", async () => {
    const { gateway, lines } = await loggedGateway("info");
    try {
      const res = await send(gateway, "POST", "/v1/queues/emails/jobs", { name: "Send", data: { to: "a@b.c" } });
      const requestId = res.headers.get("x-request-id");
      expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
      await send(gateway, "GET", "/cloudq/emails");
      await send(gateway, "GET", "/glidemq/queues/emails/counts");
      await send(gateway, "GET", "/dashboard/queues/emails");
      const [enqueue, reserve, counts, page] = lines();
      expect(enqueue).toMatchObject({
        msg: "request",
        level: 30,
        requestId,
        door: "native",
        method: "POST",
        route: "/v1/queues/:queue/jobs",
        queue: "emails",
        status: 201,
        durationMs: expect.any(Number),
      });
      expect(reserve).toMatchObject({ door: "cloudq", method: "GET", queue: "emails", status: 200 });
      expect(counts).toMatchObject({ door: "glidemq", route: "/glidemq/queues/:queue/counts", queue: "emails", status: 200 });
      // The dashboard's pages are its own, not a Cloudq queue named "dashboard".
      expect(page).toMatchObject({ door: "dashboard", method: "GET", status: 200 });
    } finally {
      await gateway.close();
    }
  });

  it("keeps a caller's plain X-Request-Id, replaces one that is not, and never logs job data, query values or credentials", async () => {
    const { gateway, lines, raw } = await loggedGateway("info");
    try {
      const kept = await send(gateway, "GET", "/health", undefined, { "x-request-id": "edge-42.a" });
      expect(kept.headers.get("x-request-id")).toBe("edge-42.a");
      const replaced = await send(gateway, "GET", "/health", undefined, { "x-request-id": "bad id\u0001" });
      expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      await send(
        gateway,
        "POST",
        "/v1/queues/secrets/jobs",
        { name: "Pay", data: { card: "4111-SECRET-DATA" } },
        { authorization: "Bearer tok-SECRET" },
      );
      await send(gateway, "GET", "/v1/queues/secrets/jobs?state=waiting&cursor=SECRET-CURSOR");
      expect(lines().map((line) => line.requestId)).toContain("edge-42.a");
      expect(raw()).not.toContain("SECRET");
    } finally {
      await gateway.close();
    }
  });

  it("names the request's token, never its value", async () => {
    const { gateway, lines, raw } = await loggedGateway("info", { tokens: [{ name: "ci-bot", token: "tok-VALUE-123", access: "read" }] });
    try {
      await send(gateway, "GET", "/v1/queues", undefined, { authorization: "Bearer tok-VALUE-123" });
      expect(lines()[0]).toMatchObject({ token: "ci-bot", status: 200 });
      expect(raw()).not.toContain("VALUE");
    } finally {
      await gateway.close();
    }
  });

  it("at level warn, requests are not logged", async () => {
    const { gateway, lines } = await loggedGateway("warn");
    try {
      await send(gateway, "GET", "/health");
      expect(lines()).toEqual([]);
    } finally {
      await gateway.close();
    }
  });

  it("switchyard serve refuses an unknown --log-level with the list of levels", async () => {
    const io = { out: () => undefined, err: () => undefined, env: {} };
    await expect(runCli(["serve", "--log-level", "loud", "--port", "0"], io)).rejects.toThrow(
      '--log-level must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
    );
  });
});
