import { defineAdapter } from "@switchyard/core";
import { z } from "zod";

/** `qless-redis` in a gateway configuration: `url` is `redis://host:port/db`. */
export const qlessAdapter = defineAdapter({
  type: "qless-redis",
  optionsSchema: z.strictObject({
    url: z.string().regex(/^rediss?:\/\//, "a redis:// or rediss:// URL"),
  }),
  create: async (options) => {
    // Loaded here so that a host offering this adapter loads ioredis only when it opens one.
    const { createQlessBackend } = await import("./backend.js");
    return createQlessBackend(options);
  },
  nativeKey: "qless",
});
