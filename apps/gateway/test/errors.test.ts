import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BackendUnavailableError,
  ConflictError,
  InvalidStateError,
  LeaseLostError,
  NotFoundError,
  type SwitchyardError,
  UnsupportedError,
  ValidationError,
} from "@switchyard/core";
import { workerQueueAdapter } from "@switchyard/workerqueue-sql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Gateway, createGateway } from "../src/index.js";
import { type TestGateway, openTestGateway, send } from "./helpers.js";

const THROWN: Array<[string, () => SwitchyardError, number]> = [
  ["VALIDATION", () => new ValidationError("bad thing"), 400],
  ["NOT_FOUND", () => new NotFoundError("no thing"), 404],
  ["LEASE_LOST", () => new LeaseLostError("lease moved"), 409],
  ["CONFLICT", () => new ConflictError("already there"), 409],
  ["INVALID_STATE", () => new InvalidStateError("not now"), 409],
  ["UNSUPPORTED", () => new UnsupportedError("cannot do that here"), 501],
  ["BACKEND_UNAVAILABLE", () => new BackendUnavailableError("store is down"), 503],
];

describe("one error handler maps typed core errors to HTTP in every door", () => {
  const dir = mkdtempSync(join(tmpdir(), "switchyard-errors-"));
  let gateway: Gateway;
  beforeAll(async () => {
    // The real SQLite backend, except that reserving from `fail-<CODE>` throws that typed error.
    gateway = await createGateway({
      config: { backends: { main: { type: "workerqueue-sql", url: `sqlite:${join(dir, "errors.sqlite")}` } } },
      adapters: [
        {
          ...workerQueueAdapter,
          create: async (options) => {
            const backend = await workerQueueAdapter.create(options);
            const reserve = backend.reserve.bind(backend);
            backend.reserve = async (queue, opts) => {
              const entry = THROWN.find(([code]) => queue === `fail-${code}`);
              if (entry) throw entry[1]();
              if (queue === "fail-untyped") throw new Error("secret internals");
              return reserve(queue, opts);
            };
            return backend;
          },
        },
      ],
      env: {},
    });
  });
  afterAll(async () => {
    await gateway.close();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const [code, , status] of THROWN) {
    it(`${code} answers ${status} with the message, as {error:{code,message}} on /v1 and {status:"error",message} on /cloudq`, async () => {
      const native = await send(gateway, "POST", `/v1/queues/fail-${code}/reserve`, { worker: "w" });
      expect(native.status).toBe(status);
      expect(native.json.error).toEqual({ code, message: expect.any(String) });
      const cloudq = await send(gateway, "GET", `/cloudq/fail-${code}`);
      expect(cloudq.status).toBe(status);
      expect(cloudq.json).toEqual({ status: "error", message: native.json.error.message });
    });
  }

  it("an untyped failure answers 500 INTERNAL without leaking its message", async () => {
    const res = await send(gateway, "POST", "/v1/queues/fail-untyped/reserve", { worker: "w" });
    expect(res.status).toBe(500);
    expect(res.json.error).toEqual({ code: "INTERNAL", message: "internal error" });
  });
});

describe("UNSUPPORTED from the real backend", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await openTestGateway();
  });
  afterAll(async () => {
    await t.cleanup();
  });

  it("a command the backend cannot honour answers 501 with the reason and stores nothing", async () => {
    expect(t.gateway.backends.get("main")!.backend.kind).toBe("workerqueue-sql:sqlite");
    expect((await t.request("POST", "/qless/put", { args: ["c", "reports", "parent", "Report", "{}", 0] })).status).toBe(200);
    const before = t.totalRows();
    // A SQL store's job waits only for jobs of its own queue; qless's jids are global.
    const res = await t.request("POST", "/qless/put", {
      args: ["c", "exports", "child", "Export", "{}", 0, "depends", '["parent"]'],
    });
    expect(res.status).toBe(501);
    expect(res.json.error).toMatchObject({ code: "UNSUPPORTED", message: expect.stringContaining("waits only for jobs of its own queue") });
    expect(t.totalRows()).toBe(before);
  });
});
