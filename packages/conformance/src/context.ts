import { randomUUID } from "node:crypto";
import type { Backend, Capabilities, Job, JobState, Probe } from "@switchyard/core";
import { afterAll, beforeAll } from "vitest";

export interface ConformanceOptions {
  /** Shown in every suite title, e.g. `workerqueue-sql (postgres)`. */
  name: string;
  /** A fresh, ready-to-use adapter; called once per concern, and 8 times for the concurrency test. */
  createBackend: () => Promise<Backend>;
  probe: Probe;
  /** Must equal the adapter's own `capabilities`; decides which rules are skipped, with the reason. */
  capabilities: Capabilities;
  /**
   * An adapter pointed at a store that cannot be reached (a closed port, a path that cannot be
   * opened), not made ready; its operations must reject with BackendUnavailableError. Without it the
   * unreachable-store rules are skipped with that reason.
   */
  createUnreachableBackend?: () => Backend;
}

export interface SuiteContext {
  readonly backend: Backend;
  readonly probe: Probe;
  readonly capabilities: Capabilities;
  /** A queue name no other test uses, so suites can share one server. */
  queue(): string;
}

/** Creates one backend for a describe block and closes it afterwards. */
export function useBackend(options: ConformanceOptions): SuiteContext {
  let backend: Backend | undefined;
  beforeAll(async () => {
    backend = await options.createBackend();
  });
  afterAll(async () => {
    await backend?.close();
  });
  return {
    get backend() {
      if (!backend) throw new Error("backend used before beforeAll ran");
      return backend;
    },
    probe: options.probe,
    capabilities: options.capabilities,
    queue: () => `cf-${randomUUID().slice(0, 8)}`,
  };
}

/** A suite title that carries the reason when the backend declares it cannot keep the rule. */
export function titled(
  options: ConformanceOptions,
  concern: string,
  needs: Array<keyof Capabilities> = [],
): { title: string; skip: boolean } {
  const missing = needs.filter((capability) => !options.capabilities[capability]);
  if (missing.length === 0) return { title: `${options.name}: ${concern}`, skip: false };
  const reason = `skipped: ${options.name} declares ${missing.map((m) => `${m}: false`).join(", ")}`;
  console.info(`[conformance] ${concern}: ${reason}`);
  return { title: `${options.name}: ${concern} (${reason})`, skip: true };
}

/** Polls until `check` returns a value, failing after the deadline; for rules that involve time. */
export async function eventually<T>(check: () => Promise<T | undefined | null | false>, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Reserves one job or fails the test; most rules start from one reserved job. */
export async function reserveOne(ctx: SuiteContext, queue: string, worker = "worker-a", leaseMs?: number): Promise<Job> {
  const [job] = await ctx.backend.reserve(queue, leaseMs === undefined ? { worker } : { worker, leaseMs });
  if (!job) throw new Error(`expected a job to reserve in ${queue}, got none`);
  return job;
}

/** Asserts the native record encodes the core state as the native system would. */
export async function expectNativeState(ctx: SuiteContext, queue: string, id: string, state: JobState): Promise<void> {
  const native = await ctx.probe.nativeState(queue, id);
  const allowed = ctx.probe.expectedStates[state];
  if (!allowed) throw new Error(`probe declares no native states for core state ${state}`);
  if (!allowed.includes(native)) {
    throw new Error(
      `native record of ${id} holds state ${JSON.stringify(native)}; ${state} is stored as one of ${JSON.stringify(allowed)}`,
    );
  }
}
