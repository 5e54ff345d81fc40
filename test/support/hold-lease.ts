/**
 * A worker process for the crash test: opens a backend from the spec given as JSON, reserves one job
 * of the queue with a short lease, prints `held <id>` and then waits to be killed.
 *   node --import tsx --conditions=@switchyard/source test/support/hold-lease.ts '<spec json>' <queue> <leaseMs>
 */
import { ADAPTERS } from "@switchyard/gateway";

const [specJson = "{}", queue = "", leaseMs = "1000"] = process.argv.slice(2);
const spec = JSON.parse(specJson) as { type: string; url: string; options: Record<string, unknown> };
const adapter = ADAPTERS.find((candidate) => candidate.type === spec.type);
if (!adapter) throw new Error(`no adapter ${spec.type}`);
const backend = await adapter.create(adapter.optionsSchema.parse({ ...spec.options, url: spec.url }));
await backend.ready();
const [job] = await backend.reserve(queue, { worker: "doomed", leaseMs: Number(leaseMs) });
process.stdout.write(job ? `held ${job.id}\n` : "nothing\n");
setInterval(() => undefined, 60_000);
