import { randomUUID } from "node:crypto";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { createCloudqBackend } from "../src/index.js";
export { cloudqProbe, rawFilter } from "../src/testing.js";

/** A database of its own per test file, so parallel files never see each other's jobs. */
export function testDatabase(prefix: string): string {
  return `cloudq_${prefix}_${randomUUID().slice(0, 8)}`;
}

export function mongoUrl(): string {
  return serviceUrl("mongo");
}

/** A raw client for probes and legacy inserts: it reads and writes documents as the legacy servers do. */
export async function rawClient(): Promise<MongoClient> {
  const client = new MongoClient(mongoUrl());
  await client.connect();
  return client;
}

/**
 * A test file's own database, a raw client for probes and a default backend on it, opened before the
 * file's tests and closed after them. `queue()` gives a fresh queue name with the given prefix.
 */
export function useCloudqDatabase(prefix: string, queuePrefix: string) {
  const database = testDatabase(prefix);
  let client: MongoClient | undefined;
  let backend: ReturnType<typeof createCloudqBackend> | undefined;
  beforeAll(async () => {
    client = await rawClient();
    backend = createCloudqBackend({ url: mongoUrl(), database });
    await backend.ready();
  });
  afterAll(async () => {
    await backend?.close();
    await client?.close();
  });
  const opened = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("used before beforeAll ran");
    return value;
  };
  return {
    database,
    client: () => opened(client),
    backend: () => opened(backend),
    jobs: () => opened(client).db(database).collection("cloudq.jobs"),
    queue: () => `${queuePrefix}-${Math.random().toString(36).slice(2, 10)}`,
  };
}
