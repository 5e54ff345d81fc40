import { BackendUnavailableError } from "@switchyard/core";
import type { ClusterOptions, RedisOptions } from "ioredis";
import type { RedisClient } from "./scripts.js";

/** How the adapter reaches Valkey/Redis: a URL, a client of your own, or cluster seed nodes. */
export type GlideMqConnection =
  | { url: string; options?: RedisOptions }
  | { redis: RedisClient }
  | { cluster: { nodes: Array<string | { host: string; port: number }>; options?: ClusterOptions } };

/** ioredis is a peer dependency, loaded only when the adapter has to create the client itself. */
export async function openClient(connection: GlideMqConnection): Promise<{ client: RedisClient; owned: boolean }> {
  if ("redis" in connection) return { client: connection.redis, owned: false };
  let ioredis: { Redis: typeof import("ioredis").Redis; Cluster: typeof import("ioredis").Cluster };
  try {
    const loaded = await import("ioredis");
    ioredis = { Redis: loaded.Redis, Cluster: loaded.Cluster };
  } catch (cause) {
    throw new BackendUnavailableError("glidemq-valkey: the peer dependency ioredis is not installed (npm install ioredis)", { cause });
  }
  if ("url" in connection) {
    return { client: quiet(new ioredis.Redis(connection.url, { maxRetriesPerRequest: 3, ...connection.options })), owned: true };
  }
  const nodes = connection.cluster.nodes.map((node) => {
    if (typeof node !== "string") return node;
    const [host, port] = node.split(":");
    return { host: host ?? "127.0.0.1", port: Number(port) };
  });
  return { client: quiet(new ioredis.Cluster(nodes, connection.cluster.options)), owned: true };
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
