import { type CloudqBackendOptions, createCloudqBackend } from "@switchyard/cloudq-mongo";
import type { Backend } from "@switchyard/core";
import { type GlideMqBackendOptions, type GlideMqConnection, createGlideMqBackend } from "@switchyard/glidemq-valkey";
import { createQlessBackend } from "@switchyard/qless-redis";
import { createWorkerQueueBackend } from "@switchyard/workerqueue-sql";
import type { RedisOptions } from "ioredis";
import type { BackendSpec, BackendType, Config } from "./config.js";
import { ConfigError } from "./config.js";

/** Builds one adapter from its config entry; the gateway calls `ready()` on what it returns. */
export type BackendFactory = (spec: { url: string; options: Record<string, unknown> }) => Backend | Promise<Backend>;
export type BackendRegistry = Partial<Record<BackendType, BackendFactory>>;

/**
 * The adapters this build ships. Adding one is one line: import its factory and map its type.
 * Types the config accepts but that are missing here answer a ConfigError naming the backend.
 */
export const defaultRegistry: BackendRegistry = {
  "workerqueue-sql": ({ url, options }) => createWorkerQueueBackend({ url, ...options }),
  "qless-redis": ({ url, options }) => createQlessBackend({ url, ...options }),
  "cloudq-mongo": ({ url, options }) => createCloudqBackend({ ...options, url } as CloudqBackendOptions),
  "glidemq-valkey": ({ url, options: { cluster, redisOptions, ...options } }) =>
    createGlideMqBackend(
      glideConnection(url, cluster === true, redisOptions as RedisOptions | undefined),
      options as GlideMqBackendOptions,
    ),
};

/**
 * glide-mq runs on a standalone server or a cluster. With `options.cluster: true` the url lists
 * seed nodes, `redis://host1:port1,host2:port2`; every key of a queue shares one hash tag, so any
 * primary can be a seed. `options.redisOptions` (ioredis options: password, tls...) apply to every
 * connection, which is how a cluster gets its credentials.
 */
function glideConnection(url: string, cluster: boolean, redisOptions: RedisOptions | undefined): GlideMqConnection {
  if (!cluster) return redisOptions ? { url, options: redisOptions } : { url };
  const nodes = url
    .replace(/^[a-z]+:\/\//i, "")
    .replace(/\/.*$/, "")
    .split(",")
    .filter((node) => node.length > 0);
  return { cluster: { nodes, ...(redisOptions ? { options: { redisOptions } } : {}) } };
}

/** A configured backend with the name the routes use. */
export interface NamedBackend {
  name: string;
  spec: BackendSpec;
  backend: Backend;
}

async function openBackend(name: string, spec: BackendSpec, registry: BackendRegistry): Promise<NamedBackend> {
  const factory = registry[spec.type];
  if (!factory) {
    const available = Object.keys(registry).join(", ") || "none";
    throw new ConfigError(`backends.${name}.type: the "${spec.type}" adapter is not available in this build (available: ${available})`);
  }
  let backend: Backend;
  try {
    backend = await factory({ url: spec.url, options: spec.options });
  } catch (error) {
    throw new ConfigError(`backends.${name}: cannot create ${spec.type} backend: ${(error as Error).message}`, { cause: error });
  }
  try {
    await backend.ready();
  } catch (error) {
    await backend.close().catch(() => undefined);
    throw new ConfigError(
      `backends.${name}: ${spec.type} backend at ${redactUrl(spec.url)} is not reachable: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
  return { name, spec, backend };
}

/** Opens every configured backend, or none: a failure closes those already opened. */
export async function openBackends(config: Config, registry: BackendRegistry = defaultRegistry): Promise<Map<string, NamedBackend>> {
  const opened = new Map<string, NamedBackend>();
  try {
    for (const [name, spec] of Object.entries(config.backends)) {
      opened.set(name, await openBackend(name, spec, registry));
    }
  } catch (error) {
    await closeBackends(opened);
    throw error;
  }
  return opened;
}

/** Closes every backend even if some fail; the first failure is rethrown after all were tried. */
export async function closeBackends(backends: Map<string, NamedBackend>): Promise<void> {
  const results = await Promise.allSettled([...backends.values()].map(({ backend }) => backend.close()));
  const failure = results.find((result) => result.status === "rejected");
  if (failure) throw failure.reason;
}

/** Hides the password of a URL in messages and logs. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@/]*@/, "//$1:***@");
}
