import { defineAdapter } from "@switchyard/core";
import type { RedisOptions } from "ioredis";
import { z } from "zod";

const StalledRecoverySchema = z.strictObject({
  interval: z.number().int().positive().optional(),
  stalledInterval: z.number().int().positive().optional(),
  lockDuration: z.number().int().positive().optional(),
  maxStalledCount: z.number().int().nonnegative().optional(),
});

/**
 * `glidemq-valkey` in a gateway configuration. `url` is `redis://host:port`, or with
 * `cluster: true` a list of seed nodes, `redis://host1:port1,host2:port2`; `redisOptions` are
 * ioredis options (password, tls...) for every connection.
 */
export const glideMqAdapter = defineAdapter({
  type: "glidemq-valkey",
  optionsSchema: z.strictObject({
    url: z.string().regex(/^(rediss?|valkeys?):\/\//, "a redis:// or rediss:// URL"),
    cluster: z.boolean().optional(),
    redisOptions: z.record(z.string(), z.unknown()).optional(),
    prefix: z.string().min(1).optional(),
    compression: z.literal("gzip").optional(),
    useGlideFunctions: z.boolean().optional(),
    stalledRecovery: z.union([z.literal(false), StalledRecoverySchema]).optional(),
  }),
  create: async ({ url, cluster, redisOptions, ...settings }, host) => {
    // Loaded here so that a host offering this adapter loads ioredis only when it opens one.
    const { createGlideMqBackend } = await import("./backend.js");
    return createGlideMqBackend({
      ...settings,
      ...(host?.clock ? { clock: host.clock } : {}),
      url,
      ...(cluster ? { cluster: true as const } : {}),
      ...(redisOptions ? { redisOptions: redisOptions as RedisOptions } : {}),
    });
  },
  nativeKey: "glide",
});
