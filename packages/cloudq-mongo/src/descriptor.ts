import { defineAdapter } from "@switchyard/core";
import { z } from "zod";
import { createCloudqBackend } from "./backend.js";
import { LayoutOptionsSchema } from "./options.js";

/** `cloudq-mongo` in a gateway configuration: `url` is a `mongodb://` connection string. */
export const cloudqAdapter = defineAdapter({
  type: "cloudq-mongo",
  optionsSchema: LayoutOptionsSchema.extend({
    url: z.string().regex(/^mongodb(\+srv)?:\/\//, "a mongodb:// or mongodb+srv:// connection string"),
  }),
  create: (options, host) => createCloudqBackend({ ...options, ...(host?.clock ? { clock: host.clock } : {}) }),
  nativeKey: "cloudq",
});
