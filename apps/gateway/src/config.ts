import { readFile } from "node:fs/promises";
import { extname } from "node:path";
import type { AdapterDescriptor } from "@switchyard/core";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { ADAPTERS } from "./adapters.js";
import { AuthSchema } from "./auth.js";
import { WORKQ_WAKE_PORT } from "./wake-listener.js";

/** Where `switchyard serve` listens unless told otherwise. */
export const DEFAULT_PORT = 8080;
export const DEFAULT_HOST = "0.0.0.0";

/** A backend entry as the file gives it; its `options` are validated by the adapter's own schema. */
const BackendEntrySchema = z.strictObject({
  type: z.string().min(1),
  url: z.string().min(1),
  /** Passed to the adapter next to `url`; each adapter documents its own options. */
  options: z.record(z.string(), z.unknown()).default({}),
  /** A call this backend has not answered within this long is a 503, so a frozen store holds no request open. */
  timeoutMs: z.number().int().min(1).max(600_000).default(5_000),
  /** Read the store's own event feed (moves made by other processes too); false: only this gateway's calls. */
  storeEvents: z.boolean().default(true),
});
export type BackendSpec = z.output<typeof BackendEntrySchema>;

const RouteSchema = z.strictObject({
  /** A queue-name pattern; `*` matches any run of characters, everything else matches itself. */
  pattern: z.string().min(1),
  backend: z.string().min(1),
});
export type Route = z.output<typeof RouteSchema>;

/** Cloudq's default lease: a Ruby client may take 300 s per request, so a job is held as long. */
export const DEFAULT_CLOUDQ_LEASE_MS = 300_000;

const CloudqDoorSchema = z.strictObject({
  /** Also serve the Cloudq routes at `/`, for clients that cannot be given a path prefix. */
  mountAtRoot: z.boolean().default(false),
  /** Basic auth user; auth is on only when both token and secret are set (here or in TOKEN/SECRET). */
  token: z.string().min(1).nullable().default(null),
  secret: z.string().min(1).nullable().default(null),
  leaseMs: z.number().int().positive().default(DEFAULT_CLOUDQ_LEASE_MS),
  /**
   * How long `GET /:queue` waits for a job before answering empty, as node-cloudq 2.x does with its
   * TIMEOUT (500 ms there); 0 answers at once, as the Mongo-era servers did.
   */
  longPollMs: z.number().int().nonnegative().max(300_000).default(0),
});
export type CloudqDoorConfig = z.output<typeof CloudqDoorSchema>;

const WorkerQueueDoorSchema = z.strictObject({
  /** The queue of jobs created or reserved without one: workerqueue-sql's default, where legacy rows live. */
  queue: z.string().min(1).max(255).default("default"),
  /**
   * A UDP port where each datagram wakes the door's waiting reservers, as one wakes workqd's master;
   * off unless given. `{}` listens on workqd's port 4488 on every interface, as workqd does.
   */
  udp: z
    .strictObject({
      port: z.number().int().min(0).max(65_535).default(WORKQ_WAKE_PORT),
      host: z.string().min(1).default("0.0.0.0"),
    })
    .nullable()
    .default(null),
});
export type WorkerQueueDoorConfig = z.output<typeof WorkerQueueDoorSchema>;

const GlidemqDoorSchema = z.strictObject({
  /** Also serve glide-mq's proxy routes at `/` (`/queues/...`), where its HTTP producers expect them. */
  mountAtRoot: z.boolean().default(false),
});

const QlessDoorSchema = z.strictObject({
  /**
   * The time a qless command runs at on a store that is not qless-redis: `caller`, the `now` the
   * client passed (as qless's script takes it), or `store`, the gateway's own clock. qless-redis
   * stores always get the client's `now`, as qless's script does.
   */
  clock: z.enum(["caller", "store"]).default("caller"),
});

const RespDoorSchema = z.strictObject({
  /** The Redis-protocol listener for qless clients (`switchyard serve --resp-port`); off when null. */
  port: z.number().int().min(0).max(65535).nullable().default(null),
  host: z.string().min(1).default("127.0.0.1"),
  /**
   * Redis's `client-output-buffer-limit pubsub` hard limit, and its default: a subscriber with more
   * bytes than this waiting to be sent is disconnected, not buffered without bound. 0: no limit.
   */
  pubsubOutputLimitBytes: z
    .number()
    .int()
    .min(0)
    .default(32 * 1024 * 1024),
});

const DoorsSchema = z.strictObject({
  resp: RespDoorSchema.default(RespDoorSchema.parse({})),
  qless: QlessDoorSchema.default(QlessDoorSchema.parse({})),
  glidemq: GlidemqDoorSchema.default(GlidemqDoorSchema.parse({})),
  cloudq: CloudqDoorSchema.default(CloudqDoorSchema.parse({})),
  workerqueue: WorkerQueueDoorSchema.default(WorkerQueueDoorSchema.parse({})),
});

/**
 * The configuration schema for a list of adapters: a backend's `type` must name one of them, and its
 * `url` and `options` must pass that adapter's schema (issues keep their path, e.g.
 * `backends.main.options.table`). The parsed `options` are the adapter's, defaults filled in.
 */
export function configSchema(adapters: readonly AdapterDescriptor[] = ADAPTERS) {
  const byType = new Map(adapters.map((adapter) => [adapter.type, adapter]));
  const BackendSpecSchema = BackendEntrySchema.transform((spec, ctx) => {
    const adapter = byType.get(spec.type);
    if (!adapter) {
      ctx.addIssue({
        code: "custom",
        path: ["type"],
        message: `unknown backend type "${spec.type}" (known: ${[...byType.keys()].join(", ")})`,
      });
      return z.NEVER;
    }
    const parsed = adapter.optionsSchema.safeParse({ ...spec.options, url: spec.url });
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        const path = issue.path[0] === "url" ? issue.path : ["options", ...issue.path];
        ctx.addIssue({ code: "custom", path: path as PropertyKey[], message: issue.message });
      }
      return z.NEVER;
    }
    const { url: _url, ...options } = parsed.data;
    return { ...spec, options: options as Record<string, unknown> };
  });
  return z
    .strictObject({
      backends: z.record(z.string().regex(/^[A-Za-z0-9_-]+$/, "backend names use letters, digits, _ and -"), BackendSpecSchema),
      /** First match wins. Omitted: every queue goes to the only backend. */
      routes: z.array(RouteSchema).optional(),
      doors: DoorsSchema.default(DoorsSchema.parse({})),
      /** Bearer tokens; with none, every door is open (as before), with any, none is open without one. */
      auth: AuthSchema.default({ tokens: [] }),
      /**
       * How often a waiting reserve (a Cloudq long poll, a Worker Queue reserve with waitMs) looks
       * again for jobs that came without waking it: from a legacy producer, another gateway, a lease
       * running out. Jobs enqueued through this gateway, and datagrams on the UDP port, wake it at once.
       */
      longPollIntervalMs: z.number().int().min(10).max(60_000).default(100),
    })
    .superRefine((config, ctx) => {
      const names = Object.keys(config.backends);
      if (names.length === 0) ctx.addIssue({ code: "custom", path: ["backends"], message: "at least one backend is required" });
      if (config.routes === undefined) {
        if (names.length > 1)
          ctx.addIssue({ code: "custom", path: ["routes"], message: "routes are required when there is more than one backend" });
        return;
      }
      config.routes.forEach((route, index) => {
        if (!(route.backend in config.backends)) {
          const known = names.length > 0 ? names.join(", ") : "none";
          ctx.addIssue({
            code: "custom",
            path: ["routes", index, "backend"],
            message: `unknown backend "${route.backend}" (known: ${known})`,
          });
        }
      });
    })
    .transform((config) => ({
      ...config,
      routes: config.routes ?? Object.keys(config.backends).map((backend) => ({ pattern: "*", backend })),
    }));
}

/** The file's shape (what a caller may pass to createGateway) and the parsed, defaults-filled shape. */
export type ConfigInput = z.input<ReturnType<typeof configSchema>>;
export type Config = z.output<ReturnType<typeof configSchema>>;

/** A configuration that cannot be used; the message names the file and the bad field. */
export class ConfigError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ConfigError";
  }
}

/** The embedded default: one SQLite file in the working directory serves every queue. */
export const DEFAULT_SQLITE_URL = "sqlite:./switchyard.sqlite";

export function defaultConfig(): Config {
  return parseConfig({ backends: { main: { type: "workerqueue-sql", url: DEFAULT_SQLITE_URL } } });
}

/** Validates a configuration object; `source` names where it came from in error messages. */
export function parseConfig(value: unknown, source = "config", adapters: readonly AdapterDescriptor[] = ADAPTERS): Config {
  const parsed = configSchema(adapters).safeParse(value);
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map((issue) => {
    const path = issue.path.length > 0 ? issue.path.join(".") : "(top level)";
    return `  ${path}: ${issue.message}`;
  });
  throw new ConfigError(`${source} is invalid:\n${lines.join("\n")}`);
}

/**
 * Reads a YAML or JSON file (chosen by extension; anything else is tried as YAML, which is a
 * superset of JSON). No path: the embedded SQLite default.
 */
export async function loadConfig(path?: string, adapters: readonly AdapterDescriptor[] = ADAPTERS): Promise<Config> {
  if (path === undefined || path === "") return defaultConfig();
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new ConfigError(`cannot read config file ${path}: ${(error as Error).message}`, { cause: error });
  }
  let value: unknown;
  try {
    value = extname(path).toLowerCase() === ".json" ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new ConfigError(`config file ${path} is not valid ${extname(path) === ".json" ? "JSON" : "YAML"}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  return parseConfig(value, `config file ${path}`, adapters);
}
