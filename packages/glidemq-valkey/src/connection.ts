import { BackendUnavailableError } from "@switchyard/core";
import type { ClusterOptions, RedisOptions } from "ioredis";
import type { RedisClient } from "./scripts.js";

/**
 * How the adapter reaches Valkey/Redis: a URL, a client of your own, or a cluster. With
 * `cluster: true` the URL lists seed nodes, `redis://host1:port1,host2:port2`; every key of a queue
 * shares one hash tag, so any primary can be a seed. `redisOptions` (password, tls...) apply to
 * every connection, the cluster's nodes included.
 */
export type GlideMqConnection =
  | { url: string; cluster?: false; redisOptions?: RedisOptions; redis?: never }
  | { url: string; cluster: true; redisOptions?: RedisOptions; clusterOptions?: ClusterOptions; redis?: never }
  | { redis: RedisClient; url?: never };

/** The seed nodes of a cluster URL: `redis://h1:6379,h2:6380` gives both; a missing port is 6379. */
export function clusterNodes(url: string): Array<{ host: string; port: number }> {
  return url
    .replace(/^[a-z]+:\/\//i, "")
    .replace(/\/.*$/, "")
    .split(",")
    .filter((node) => node.length > 0)
    .map((node) => {
      const at = node.lastIndexOf(":");
      return at < 0 ? { host: node, port: 6379 } : { host: node.slice(0, at), port: Number(node.slice(at + 1)) };
    });
}

/** ioredis is a peer dependency, loaded only when the adapter has to create the client itself. */
export async function openClient(connection: GlideMqConnection): Promise<{ client: RedisClient; owned: boolean }> {
  if (connection.redis) return { client: connection.redis, owned: false };
  let ioredis: { Redis: typeof import("ioredis").Redis; Cluster: typeof import("ioredis").Cluster };
  try {
    const loaded = await import("ioredis");
    ioredis = { Redis: loaded.Redis, Cluster: loaded.Cluster };
  } catch (cause) {
    throw new BackendUnavailableError("glidemq-valkey: the peer dependency ioredis is not installed (npm install ioredis)", { cause });
  }
  if (!connection.cluster) {
    return { client: quiet(new ioredis.Redis(connection.url, { maxRetriesPerRequest: 3, ...connection.redisOptions })), owned: true };
  }
  const options: ClusterOptions = {
    ...connection.clusterOptions,
    ...(connection.redisOptions ? { redisOptions: { ...connection.clusterOptions?.redisOptions, ...connection.redisOptions } } : {}),
  };
  return { client: quiet(new ioredis.Cluster(clusterNodes(connection.url), options)), owned: true };
}

/**
 * Connection errors of a client we own reach callers through the failed command (as
 * BackendUnavailableError); without a listener ioredis would also print each one as an
 * "Unhandled error event". A client given to us is the caller's to listen to.
 */
function quiet<Client extends RedisClient>(client: Client): Client {
  client.on("error", () => {});
  return client;
}
