import type { Backend } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import type { ConformanceOptions } from "../context.js";

/**
 * A store that cannot be reached is a typed error on every operation, never a hang or a driver's
 * own error: the gateway answers it with 503, and the driver's error stays as the cause.
 */
export function unreachableSuite(options: ConformanceOptions): void {
  const { createUnreachableBackend } = options;
  const reason = `skipped: ${options.name} gives no createUnreachableBackend`;
  const title = `${options.name}: unreachable store${createUnreachableBackend ? "" : ` (${reason})`}`;
  if (!createUnreachableBackend) console.info(`[conformance] unreachable store: ${reason}`);
  describe.skipIf(!createUnreachableBackend)(title, () => {
    const operations: Array<[string, (backend: Backend) => Promise<unknown>]> = [
      ["enqueue", (b) => b.enqueue("cf-unreachable", { name: "x" })],
      ["enqueueBulk", (b) => b.enqueueBulk("cf-unreachable", [{ name: "x" }])],
      ["reserve", (b) => b.reserve("cf-unreachable", { worker: "w" })],
      ["complete", (b) => b.complete("cf-unreachable", "1", { worker: "w" })],
      ["get", (b) => b.get("cf-unreachable", "1")],
      ["list", (b) => b.list("cf-unreachable", { state: "waiting" })],
      ["counts", (b) => b.counts("cf-unreachable")],
      ["export", (b) => b.export("cf-unreachable")],
    ];
    for (const [name, call] of operations) {
      it(`${name}() rejects with BackendUnavailableError carrying the driver's error as cause`, async () => {
        const backend = createUnreachableBackend?.();
        if (!backend) throw new Error("createUnreachableBackend returned nothing");
        try {
          const error = await call(backend).then(
            () => undefined,
            (rejection: unknown) => rejection,
          );
          expect(error).toMatchObject({ code: "BACKEND_UNAVAILABLE" });
          expect((error as Error).cause).toBeDefined();
        } finally {
          await backend.close().catch(() => undefined);
        }
      });
    }
  });
}
