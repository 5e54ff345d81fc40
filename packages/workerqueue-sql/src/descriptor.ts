import { defineAdapter } from "@switchyard/core";
import { z } from "zod";
import { NATIVE_KEY } from "./row.js";
import { parseLegacyMaster } from "./wake.js";

/**
 * `workerqueue-sql` in a gateway configuration: `url` is `sqlite:<path>`, `postgres://...` or
 * `mysql://...` (MariaDB too).
 */
export const workerQueueAdapter = defineAdapter({
  type: "workerqueue-sql",
  optionsSchema: z.strictObject({
    url: z.string().regex(/^(sqlite:|postgres(ql)?:\/\/|mysql:\/\/|mariadb:\/\/)/, "a sqlite:, postgres:// or mysql:// URL"),
    table: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]{0,39}$/, "a SQL identifier of at most 40 characters")
      .optional(),
    dataFormat: z.enum(["json", "yaml"]).optional(),
    defaultQueue: z.string().min(1).optional(),
    createSchema: z.boolean().optional(),
    sqliteSynchronous: z.enum(["normal", "full"]).optional(),
    preparedStatements: z.boolean().optional(),
    wakeMasters: z
      .array(
        z.string().refine((text) => {
          try {
            parseLegacyMaster(text);
            return true;
          } catch {
            return false;
          }
        }, "a master address: host:port, workq://host[:port] or rjqueue://host[:port]"),
      )
      .optional(),
    releaseDelayedEveryMs: z.number().int().nonnegative().optional(),
  }),
  create: async (options, host) => {
    // Loaded here so that a host offering this adapter loads knex and its drivers only when it opens one.
    const { createWorkerQueueBackend } = await import("./backend.js");
    return createWorkerQueueBackend({ ...options, ...(host?.clock ? { clock: host.clock } : {}) });
  },
  nativeKey: NATIVE_KEY,
});
