import { describe, expect, it } from "vitest";
import { type ConformanceOptions, titled } from "./context.js";
import { bulkSuite } from "./suites/bulk.js";
import { claimOrderSuite } from "./suites/claim-order.js";
import { completeFailSuite } from "./suites/complete-fail.js";
import { concurrencySuite } from "./suites/concurrency.js";
import { cursorSuite } from "./suites/cursors.js";
import { editingSuite } from "./suites/editing.js";
import { enqueueSuite } from "./suites/enqueue.js";
import { exportImportSuite } from "./suites/export-import.js";
import { leaseSuite } from "./suites/leases.js";
import { listingSuite } from "./suites/listing.js";
import { pauseSuite } from "./suites/pause.js";
import { progressSuite } from "./suites/progress.js";
import { recurringSuite } from "./suites/recurring.js";
import { removalSuite } from "./suites/removal.js";
import { reserveSuite } from "./suites/reserve.js";
import { delaySuite, dependencySuite, prioritySuite } from "./suites/scheduling.js";
import { cancelSuite, uniquenessSuite } from "./suites/uniqueness-cancel.js";
import { unreachableSuite } from "./suites/unreachable.js";

export type { ConformanceOptions, SuiteContext } from "./context.js";
export type { Probe } from "@switchyard/core";
export { eventually } from "./context.js";

/**
 * Runs the whole contract against one backend. Call it at the top level of an adapter's test file:
 * `runConformance({ name, createBackend, probe, capabilities })`.
 */
export function runConformance(options: ConformanceOptions): void {
  describe(titled(options, "declared capabilities").title, () => {
    it("the adapter's capabilities are the ones the suite was given", async () => {
      const backend = await options.createBackend();
      try {
        expect(backend.capabilities).toEqual(options.capabilities);
      } finally {
        await backend.close();
      }
    });
  });
  enqueueSuite(options);
  bulkSuite(options);
  reserveSuite(options);
  leaseSuite(options);
  claimOrderSuite(options);
  completeFailSuite(options);
  delaySuite(options);
  prioritySuite(options);
  dependencySuite(options);
  uniquenessSuite(options);
  cancelSuite(options);
  listingSuite(options);
  cursorSuite(options);
  pauseSuite(options);
  progressSuite(options);
  editingSuite(options);
  removalSuite(options);
  recurringSuite(options);
  exportImportSuite(options);
  concurrencySuite(options);
  unreachableSuite(options);
}
