import { ValidationError } from "@switchyard/core";
import { Redis } from "ioredis";

export interface QlessBackendOptions {
  /** `redis://host:port/db`; the backend opens (and closes) its own connection. */
  url?: string;
  /** An injected ioredis client instead of a URL; the backend leaves it open on close(). */
  redis?: Redis;
  /**
   * Failure group for errors that name none (qless needs one): default `<queue>-error`, following
   * qless-py's `<queue>-<Exception>` convention.
   */
  defaultFailureGroup?: (queue: string) => string;
}

export interface ResolvedOptions {
  redis: Redis;
  ownsClient: boolean;
  failureGroup: (queue: string) => string;
}

export function resolveOptions(options: QlessBackendOptions): ResolvedOptions {
  if (options.redis && options.url) throw new ValidationError("qless-redis: give either url or redis, not both");
  if (!options.redis && !options.url) throw new ValidationError("qless-redis: url or redis is required");
  const redis = options.redis ?? new Redis(options.url as string, { lazyConnect: true, maxRetriesPerRequest: 2 });
  // Connection errors reach callers through the failed command (as BackendUnavailableError);
  // without a listener ioredis would also print each one as an unhandled error event.
  if (!options.redis) redis.on("error", () => {});
  return {
    redis,
    ownsClient: !options.redis,
    failureGroup: options.defaultFailureGroup ?? ((queue) => `${queue}-error`),
  };
}
