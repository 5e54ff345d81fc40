import type { z } from "zod";
import type { Backend } from "./backend.js";

/**
 * What an adapter package exports so that a gateway (or any host) can offer it without knowing it
 * by name: the list of descriptors is the registry, and each descriptor's schema validates the
 * options a configuration file gives for it.
 */
export interface AdapterDescriptor<Options extends { url: string } = { url: string }> {
  /** The backend `type` a configuration names, e.g. `qless-redis`. */
  readonly type: string;
  /**
   * The options a configuration may give, `url` included; only plain data (clients, functions and
   * other code-only options are for `create<System>Backend` callers).
   */
  readonly optionsSchema: z.ZodType<Options>;
  /**
   * Builds a backend from parsed options; the host calls `ready()` on it. `host` carries what the
   * host gives every backend in code rather than configuration (its clock). The adapters load their
   * backend code and its driver here, on first use, so that a host offering every adapter pays in
   * memory and start-up only for those it opens (mongodb's driver alone is about 20 MB).
   */
  create(options: Options, host?: AdapterHost): Promise<Backend>;
  /** The key under which this adapter keeps its own system's fields in `Job.native`. */
  readonly nativeKey: string;
}

/** What a host (the gateway) hands every adapter it creates, beside the configured options. */
export interface AdapterHost {
  /**
   * The current time in epoch ms for the backend's job records and its lease and due decisions
   * (default `Date.now`). The gateway's answers the time a qless client passed while its command runs.
   */
  clock?: () => number;
}

/** Names the options type once, where a descriptor is declared. */
export function defineAdapter<Options extends { url: string }>(descriptor: AdapterDescriptor<Options>): AdapterDescriptor<Options> {
  return descriptor;
}

/**
 * A job's native fields less those the adapters keep for their own systems: the producer's extras,
 * for a door to hand back as they came.
 */
export function producerExtras(
  native: Record<string, unknown>,
  adapters: readonly Pick<AdapterDescriptor, "nativeKey">[],
): Record<string, unknown> {
  const systemKeys = new Set(adapters.map((adapter) => adapter.nativeKey));
  return Object.fromEntries(Object.entries(native).filter(([key]) => !systemKeys.has(key)));
}
