import type { AdapterDescriptor } from "@switchyard/core";
import { redactUrl } from "../backends.js";
import type { BackendSpec, Config } from "../config.js";

/** A --from or --to that cannot be resolved; the message says what to give instead. */
export class EndpointError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EndpointError";
  }
}

/** Short names for `?type=`, beside the adapters' own type names. */
const TYPE_ALIASES: Record<string, string> = {
  qless: "qless-redis",
  glidemq: "glidemq-valkey",
  "glide-mq": "glidemq-valkey",
  workerqueue: "workerqueue-sql",
  cloudq: "cloudq-mongo",
};

/** The store type a URL's scheme implies, where it implies one (Redis holds two layouts, so it does not). */
function typeOfScheme(url: string): string | undefined {
  if (/^(sqlite:|postgres(ql)?:\/\/|mysql:\/\/|mariadb:\/\/)/.test(url)) return "workerqueue-sql";
  if (/^mongodb(\+srv)?:\/\//.test(url)) return "cloudq-mongo";
  return undefined;
}

/**
 * A --from/--to argument as a backend: a name under `backends:` in the configuration, or a URL whose
 * scheme names the store (`sqlite:./old.db`, `postgres://...`, `mongodb://...`) or whose `type`
 * parameter does (`redis://host:6379/0?type=qless`); the parameter is taken off the URL.
 */
export function resolveEndpoint(
  arg: string,
  config: Config,
  adapters: readonly AdapterDescriptor[],
  flag: string,
): { name: string; spec: BackendSpec } {
  const named = config.backends[arg];
  if (named) return { name: arg, spec: named };
  if (!/^[a-z][a-z0-9+.-]*:/i.test(arg)) {
    const known = Object.keys(config.backends).join(", ") || "none";
    throw new EndpointError(`${flag} "${arg}" is neither a backend of the configuration (known: ${known}) nor a URL`);
  }
  const [base = "", query = ""] = arg.split(/\?(.*)/s, 2);
  const params = new URLSearchParams(query);
  const given = params.get("type");
  params.delete("type");
  const rest = params.toString();
  const url = rest === "" ? base : `${base}?${rest}`;
  const type = given === null ? typeOfScheme(url) : (TYPE_ALIASES[given] ?? given);
  if (type === undefined) {
    throw new EndpointError(`${flag} ${base}: say which layout the store holds, e.g. ${base}?type=qless or ?type=glidemq`);
  }
  const adapter = adapters.find((candidate) => candidate.type === type);
  if (!adapter) throw new EndpointError(`${flag}: unknown store type "${given}" (known: ${Object.keys(TYPE_ALIASES).join(", ")})`);
  const parsed = adapter.optionsSchema.safeParse({ url });
  if (!parsed.success) throw new EndpointError(`${flag} ${base}: ${parsed.error.issues.map((issue) => issue.message).join("; ")}`);
  const { url: _url, ...options } = parsed.data as Record<string, unknown>;
  return { name: redactUrl(base), spec: { type, url, options, timeoutMs: 600_000, storeEvents: false } };
}
