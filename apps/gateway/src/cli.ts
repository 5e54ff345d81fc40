import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { redactUrl } from "./backends.js";
import type { CliIo } from "./cli-io.js";
import { ConfigError, loadConfig } from "./config.js";
import { MigrateError, runMigrateCommand } from "./migrate-command.js";
import { DEFAULT_HOST, DEFAULT_PORT, type RunningServer, startServer } from "./server.js";

const HELP = `switchyard: a job-queue gateway speaking Cloudq and a native REST API onto your queue stores

Usage:
  switchyard serve [--port 8080] [--host 0.0.0.0] [--config switchyard.yaml]
  switchyard migrate --config <file> --from <backend> --to <backend> --queue <q> [...]
                       copy a queue between backends (switchyard migrate --help)
  switchyard --help

Options:
  -p, --port <n>       port to listen on (env PORT; default ${DEFAULT_PORT})
  -H, --host <addr>    address to bind (env HOST; default ${DEFAULT_HOST})
  -c, --config <path>  YAML or JSON configuration (env SWITCHYARD_CONFIG); without one,
                       ./switchyard.sqlite serves every queue
  -h, --help           show this text

Routes: /v1 (native REST), /openapi.json, /docs, /health, /cloudq (Cloudq protocol).
SIGTERM or SIGINT stops accepting connections, finishes in-flight requests and closes the backends.
`;

const defaultIo: CliIo = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t), env: process.env };

function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535) throw new ConfigError(`--port must be a number from 0 to 65535, got "${value}"`);
  return port;
}

/**
 * Parses the command line and runs the command: `serve` resolves with the running server, `migrate`
 * and --help with undefined once done. A failed command rejects with a message for the user.
 */
export async function runCli(argv: string[], io: CliIo = defaultIo): Promise<RunningServer | undefined> {
  if (argv[0] === "migrate") {
    await runMigrateCommand(argv.slice(1), io);
    return undefined;
  }
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      port: { type: "string", short: "p" },
      host: { type: "string", short: "H" },
      config: { type: "string", short: "c" },
      help: { type: "boolean", short: "h" },
    },
  });
  const command = positionals[0];
  if (values.help || command === undefined || command === "help") {
    io.out(HELP);
    return undefined;
  }
  if (command !== "serve" || positionals.length > 1) throw new ConfigError(`unknown command "${positionals.join(" ")}"; try --help`);

  const configPath = values.config ?? io.env.SWITCHYARD_CONFIG;
  const config = await loadConfig(configPath);
  const port = parsePort(values.port ?? io.env.PORT ?? String(DEFAULT_PORT));
  const host = values.host ?? io.env.HOST ?? DEFAULT_HOST;
  const server = await startServer({ config, port, host, env: io.env });

  const backends = Object.entries(config.backends).map(([name, spec]) => `${name}=${spec.type} ${redactUrl(spec.url)}`);
  io.out(`switchyard listening on ${server.url} (config: ${configPath ?? "built-in default"}; backends: ${backends.join(", ")})\n`);
  return server;
}

/** Exits once what was written to stdout and stderr has reached them (pipes are asynchronous on some systems). */
async function exitWhenFlushed(code: number): Promise<void> {
  await Promise.all([process.stdout, process.stderr].map((stream) => new Promise((resolve) => stream.write("", resolve))));
  process.exit(code);
}

/** Runs the CLI as a process: exits non-zero with a readable message on bad input, stops gracefully on signals. */
export async function main(argv = process.argv.slice(2)): Promise<void> {
  let server: RunningServer | undefined;
  // stdout of `migrate` carries only the JSON report; drivers log through console (knex warns on
  // failed connections), so their lines go to stderr with the progress.
  if (argv[0] === "migrate") console.log = console.info = console.warn = console.error;
  try {
    server = await runCli(argv);
  } catch (error) {
    const message =
      error instanceof ConfigError || error instanceof MigrateError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")
        ? (error as Error).message
        : String(error);
    process.stderr.write(`switchyard: ${message}\n`);
    await exitWhenFlushed(1);
    return;
  }
  // A one-shot command (migrate, --help) is done: exit even if a driver left timers behind (an
  // ioredis client of a backend that never became ready keeps reconnecting).
  if (!server) return exitWhenFlushed(0);
  const running = server;
  const stop = (signal: string) => {
    process.stderr.write(`switchyard: ${signal}, finishing ${running.inFlight()} in-flight request(s)\n`);
    running.close().then(
      () => process.exit(0),
      (error) => {
        process.stderr.write(`switchyard: shutdown failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", () => stop("SIGTERM"));
  process.once("SIGINT", () => stop("SIGINT"));
}

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) await main();
