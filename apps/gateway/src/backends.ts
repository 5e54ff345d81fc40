import type { AdapterDescriptor, Backend } from "@switchyard/core";
import { ADAPTERS } from "./adapters.js";
import { callerClock } from "./caller-clock.js";
import type { BackendSpec, Config } from "./config.js";
import { ConfigError } from "./config.js";

/** A configured backend with the name the routes use. */
export interface NamedBackend {
  name: string;
  spec: BackendSpec;
  backend: Backend;
}

export async function openBackend(name: string, spec: BackendSpec, adapters: readonly AdapterDescriptor[]): Promise<NamedBackend> {
  const adapter = adapters.find((candidate) => candidate.type === spec.type);
  if (!adapter) {
    const available = adapters.map((candidate) => candidate.type).join(", ") || "none";
    throw new ConfigError(`backends.${name}.type: the "${spec.type}" adapter is not available in this build (available: ${available})`);
  }
  let backend: Backend;
  try {
    // The configuration schema validated these options against this adapter's own schema. The clock
    // is the gateway's, or a qless client's own while its command runs (caller-clock.ts).
    backend = await adapter.create({ ...spec.options, url: spec.url }, { clock: callerClock.now });
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
export async function openBackends(config: Config, adapters: readonly AdapterDescriptor[] = ADAPTERS): Promise<Map<string, NamedBackend>> {
  const opened = new Map<string, NamedBackend>();
  try {
    for (const [name, spec] of Object.entries(config.backends)) {
      opened.set(name, await openBackend(name, spec, adapters));
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
