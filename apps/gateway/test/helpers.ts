import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import type { Redis } from "ioredis";
import { type ConfigInput, type Gateway, createGateway } from "../src/index.js";

export interface TestGateway {
  gateway: Gateway;
  /** The SQLite file the workerqueue-sql backend writes. */
  file: string;
  /** Probe: rows in every table of the SQLite file, read directly, not through the adapter. */
  totalRows(): number;
  /** Probe: the native `jobs` rows, read directly. */
  nativeRows(): Array<Record<string, unknown>>;
  request(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<TestResponse>;
  cleanup(): Promise<void>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed JSON body, or undefined when the body is not JSON; loose so assertions can reach into it. */
  // biome-ignore lint/suspicious/noExplicitAny: test responses are checked field by field with expect().
  json: any;
}

function readDb<T>(file: string, read: (db: Database.Database) => T): T {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

/** A gateway on a fresh SQLite file in a temp directory, with the real workerqueue-sql backend. */
export async function openTestGateway(extra: Partial<ConfigInput> = {}, env: Record<string, string> = {}): Promise<TestGateway> {
  const dir = mkdtempSync(join(tmpdir(), "switchyard-gateway-"));
  const file = join(dir, "gateway.sqlite");
  const config: ConfigInput = { backends: { main: { type: "workerqueue-sql", url: `sqlite:${file}` } }, ...extra };
  const gateway = await createGateway({ config, env });
  return {
    gateway,
    file,
    totalRows: () =>
      readDb(file, (db) => {
        const tables = db.prepare("select name from sqlite_master where type = 'table' and name not like 'sqlite_%'").all() as Array<{
          name: string;
        }>;
        return tables.reduce((sum, { name }) => sum + (db.prepare(`select count(*) as n from "${name}"`).get() as { n: number }).n, 0);
      }),
    nativeRows: () => readDb(file, (db) => db.prepare("select * from jobs order by id").all() as Array<Record<string, unknown>>),
    request: (method, path, body, headers = {}) => send(gateway, method, path, body, headers),
    cleanup: async () => {
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Sends a request in-process; a string body goes as is, anything else as JSON. */
export async function send(
  gateway: Gateway,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<TestResponse> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === "string" ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)["content-type"] ??= "application/json";
  }
  const res = await gateway.app.request(path, init);
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/**
 * Node arguments that run the `switchyard` command from its TypeScript sources, as `npm run serve`
 * does; the built binary is tested from an installed tarball in test/packaging.test.ts.
 */
export const CLI_FROM_SOURCE = [
  "--import",
  "tsx",
  "--conditions=@switchyard/source",
  fileURLToPath(new URL("../src/cli.ts", import.meta.url)),
];

/** Waits until `check` holds, looking again every 10 ms; fails naming `what` after `timeoutMs`. */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Subscribes `subscriber` to every channel; `heard(work)` runs `work` and answers what was published
 * meanwhile. Every message of a command is in before the answer of a PING sent after its reply, so
 * a PING before and after bounds what `work` published.
 */
export async function everyChannel(subscriber: Redis) {
  let log: Array<{ channel: string; data: string }> = [];
  subscriber.on("pmessage", (_pattern: string, channel: string, data: string) => log.push({ channel, data }));
  await subscriber.psubscribe("*");
  return {
    async heard(work: () => Promise<unknown>) {
      await subscriber.ping();
      log = [];
      await work();
      await subscriber.ping();
      return log;
    },
  };
}
