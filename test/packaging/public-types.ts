import { createCloudqBackend } from "@switchyard/cloudq-mongo";
// Typechecked inside the blank project against the installed packages' .d.ts files: the public
// types a user reaches for must resolve and fit together.
import type { Backend, Capabilities, EnqueueInput, Job } from "@switchyard/core";
import { type GatewayOptions, createGateway } from "@switchyard/gateway";
import { createGlideMqBackend } from "@switchyard/glidemq-valkey";
import { createQlessBackend } from "@switchyard/qless-redis";
import { createWorkerQueueBackend } from "@switchyard/workerqueue-sql";

const input: EnqueueInput = { name: "Typed", data: { ok: true }, priority: 5 };
const backends: Backend[] = [
  createWorkerQueueBackend({ url: "sqlite::memory:" }),
  createQlessBackend({ url: "redis://127.0.0.1:6379/0" }),
  createGlideMqBackend({ url: "redis://127.0.0.1:6379" }),
  createCloudqBackend({ url: "mongodb://127.0.0.1:27017/cloudq" }),
];
const capabilities: Capabilities[] = backends.map((backend) => backend.capabilities);
const options: GatewayOptions = { config: { backends: { main: { type: "workerqueue-sql", url: "sqlite::memory:" } } } };

export async function firstJob(): Promise<Job | undefined> {
  const gateway = await createGateway(options);
  const [backend] = backends;
  if (!backend) return undefined;
  await backend.enqueue("typed", input);
  const [job] = await backend.reserve("typed", { worker: "w" });
  await gateway.close();
  return capabilities.length > 0 ? job : undefined;
}
