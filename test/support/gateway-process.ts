import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "@switchyard/conformance";
import { CLI_FROM_SOURCE } from "../../apps/gateway/test/helpers.js";

/** A `switchyard serve` process of a test, on a free port. */
export interface GatewayProcess {
  url: string;
  child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** What the process wrote to stdout and stderr so far, for failure messages. */
  output(): string;
}

/**
 * Starts `switchyard serve` from the sources with `config` written to `<dir>/<name>.json`, and waits
 * until it says where it listens. The caller kills it (every test does, in its afterAll).
 */
export async function startGatewayProcess(dir: string, name: string, config: unknown): Promise<GatewayProcess> {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(config));
  const child = spawn(
    process.execPath,
    [...CLI_FROM_SOURCE, "serve", "--config", file, "--host", "127.0.0.1", "--port", "0", "--log-level", "warn"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  child.stdout?.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    out += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const url = await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`gateway ${name} exited with ${child.exitCode}: ${out}`);
      return /listening on (http:\/\/\S+)/.exec(out)?.[1];
    },
    `gateway ${name} to listen (${out})`,
    30_000,
  );
  return { url, child, exited, output: () => out };
}
