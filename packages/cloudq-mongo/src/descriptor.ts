import { defineAdapter } from "@switchyard/core";
import { z } from "zod";
import { LayoutOptionsSchema } from "./options.js";

/** `cloudq-mongo` in a gateway configuration: `url` is a `mongodb://` connection string. */
export const cloudqAdapter = defineAdapter({
  type: "cloudq-mongo",
  optionsSchema: LayoutOptionsSchema.extend({
    url: z.string().regex(/^mongodb(\+srv)?:\/\//, "a mongodb:// or mongodb+srv:// connection string"),
  }),
  create: async (options, host) => {
    // Loaded here so that a host offering this adapter loads mongodb only when it opens one.
    const { createCloudqBackend } = await import("./backend.js");
    return createCloudqBackend({ ...options, ...(host?.clock ? { clock: host.clock } : {}) });
  },
  nativeKey: "cloudq",
});
