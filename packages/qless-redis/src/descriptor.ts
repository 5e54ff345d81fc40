import { defineAdapter } from "@switchyard/core";
import { z } from "zod";
import { createQlessBackend } from "./backend.js";

/** `qless-redis` in a gateway configuration: `url` is `redis://host:port/db`. */
export const qlessAdapter = defineAdapter({
  type: "qless-redis",
  optionsSchema: z.strictObject({
    url: z.string().regex(/^rediss?:\/\//, "a redis:// or rediss:// URL"),
  }),
  create: (options) => createQlessBackend(options),
  nativeKey: "qless",
});
