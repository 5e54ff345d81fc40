import { realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { AdapterDescriptor } from "@switchyard/core";
import { Command, CommanderError } from "commander";
import { ADAPTERS } from "./adapters.js";
import { redactUrl } from "./backends.js";
import { BRIDGE_NOTES, type RunningBridge, runBridgeCommand } from "./bridge/bridge-command.js";
import type { CliIo } from "./cli-io.js";
import { ConfigError, DEFAULT_HOST, DEFAULT_PORT, loadConfig } from "./config.js";
import { BRIDGE_NOTES as CUTOVER_NOTES, runCutover } from "./migrate/bridge.js";
import { MIGRATE_NOTES, MigrateError, runMigrateCommand, runVerifyCommand } from "./migrate/command.js";
import { LOG_LEVELS, type LogLevel, createLogger } from "./request-log.js";
import type { RunningServer } from "./server.js";

const { version } = createRequire(import.meta.url)("../package.json") as { version: string };

const DOORS = `
Doors: /v1 (native REST; described at /openapi.json and /docs), /cloudq (the Cloudq protocol),
/qless (qless's command API as JSON over HTTP), /workerqueue (Worker Queue jobs as legacy rows, with
an optional UDP wake-up port), /glidemq (glide-mq's HTTP proxy, with HTTP worker routes); /v1/events streams job events (SSE); /metrics is Prometheus;
/health checks every backend. With auth.tokens in the config, every door needs a bearer token.
SIGTERM or SIGINT stops accepting connections, finishes in-flight requests and closes the backends.
`;

const defaultIo: CliIo = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  env: process.env,
  progressStream: process.stderr,
};

/** Hosts only this machine can reach: no warning for serving them without tokens. */
const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);

function parsePort(value: string, flag = "--port"): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535) throw new ConfigError(`${flag} must be a number from 0 to 65535, got "${value}"`);
  return port;
}

function parseLogLevel(value: string): LogLevel {
  if (!(LOG_LEVELS as readonly string[]).includes(value))
    throw new ConfigError(`--log-level must be one of ${LOG_LEVELS.join(", ")}, got "${value}"`);
  return value as LogLevel;
}

async function serve(
  options: { port?: string; host?: string; config?: string; logLevel?: string; respPort?: string },
  io: CliIo,
  adapters: readonly AdapterDescriptor[],
) {
  const configPath = options.config ?? io.env.SWITCHYARD_CONFIG;
  const loaded = await loadConfig(configPath, adapters);
  const config =
    options.respPort === undefined
      ? loaded
      : { ...loaded, doors: { ...loaded.doors, resp: { ...loaded.doors.resp, port: parsePort(options.respPort, "--resp-port") } } };
  const port = parsePort(options.port ?? io.env.PORT ?? String(DEFAULT_PORT));
  const host = options.host ?? io.env.HOST ?? DEFAULT_HOST;
  const logger = createLogger(parseLogLevel(options.logLevel ?? io.env.LOG_LEVEL ?? "info"), io.logTo);
  // Loaded here, so that the one-shot commands (migrate, verify) load neither Hono nor the doors.
  const { startServer } = await import("./server.js");
  const server = await startServer({ config, port, host, env: io.env, adapters, logger });
  const backends = Object.entries(config.backends).map(([name, spec]) => `${name}=${spec.type} ${redactUrl(spec.url)}`);
  io.out(`switchyard listening on ${server.url} (config: ${configPath ?? "built-in default"}; backends: ${backends.join(", ")})\n`);
  if (server.respPort !== null) io.out(`switchyard RESP door (qless clients) on ${config.doors.resp.host}:${server.respPort}\n`);
  if (config.auth.tokens.length === 0 && !LOOPBACK.has(host)) {
    io.err(
      `switchyard: warning: listening on ${host} with no auth.tokens configured: every door is open to anyone who can reach this port\n`,
    );
  }
  return server;
}

/** The command line: every command and option is declared once, and --help is generated from it. */
/** What a command leaves running until it is stopped: the gateway, or a bridge. */
type Running = RunningServer | RunningBridge;

function program(io: CliIo, adapters: readonly AdapterDescriptor[], done: (running: Running | undefined) => void): Command {
  const cli = new Command("switchyard")
    .description(
      "A job-queue gateway: Cloudq, qless, Worker Queue, glide-mq's proxy and a native REST API onto Worker Queue SQL, qless, glide-mq and Cloudq stores.",
    )
    .version(version, "-v, --version")
    .addHelpText("after", DOORS)
    .configureOutput({ writeOut: io.out, writeErr: io.err, outputError: () => undefined })
    .exitOverride();
  cli
    .command("serve")
    .description("start the gateway (without a config file, ./switchyard.sqlite serves every queue)")
    .option("-p, --port <n>", `port to listen on (env PORT; default ${DEFAULT_PORT})`)
    .option("-H, --host <addr>", `address to bind (env HOST; default ${DEFAULT_HOST})`)
    .option("-c, --config <path>", "YAML or JSON configuration (env SWITCHYARD_CONFIG)")
    .option("--log-level <level>", `one JSON line per request at info; ${LOG_LEVELS.join(", ")} (env LOG_LEVEL; default info)`)
    .option("--resp-port <n>", "also listen for qless clients over the Redis protocol on this port (doors.resp; off by default)")
    .addHelpText("after", DOORS)
    .action(async (options) => done(await serve(options, io, adapters)));
  cli
    .command("migrate")
    .description("copy queues, every job in every state, from one backend to another, with a checkpoint and a checksum per queue")
    .option("-c, --config <path>", "YAML or JSON configuration naming the backends (env SWITCHYARD_CONFIG)")
    .option("--from <backend>", "the backend to read from: a name under `backends:` or a URL (see below)")
    .option("--to <backend>", "the backend to write to: a name or a URL")
    .option("--queue <q>", "one queue, or a pattern such as 'mail-*' (default: every queue of the source)")
    .option("--target-queue <q2>", "the queue's name on the target, with one --queue (default: the same name)")
    .option("--states <list>", "only jobs in these states, e.g. waiting,delayed (default: all)")
    .option("--mode <mode>", "copy (default) leaves the source as it was; move deletes each job from it once the target holds it")
    .option(
      "--wait-active <seconds>",
      "with --mode move: at the end, wait up to this long for jobs that were active to finish, and move them too",
    )
    .option("--batch-size <n>", "jobs per page (default 1000)")
    .option("--dry-run", "print what would move per queue and state, and what the target cannot hold; write nothing")
    .option("--resume", "continue the migration the checkpoint file records")
    .option("--checkpoint <file>", `where progress is kept (default ${"switchyard-migrate.checkpoint.json"})`)
    .option("--no-verify", "skip the checksum comparison of source and target at the end")
    .addHelpText("after", MIGRATE_NOTES)
    .action(async (options) => {
      await runMigrateCommand(options, io, adapters);
      done(undefined);
    });
  cli
    .command("verify")
    .description("compare queues in two backends by a checksum per state, listing the ids that differ")
    .option("-c, --config <path>", "YAML or JSON configuration naming the backends (env SWITCHYARD_CONFIG)")
    .option("--from <backend>", "the source: a name under `backends:` or a URL")
    .option("--to <backend>", "the target: a name or a URL")
    .option("--queue <q>", "one queue, or a pattern (default: every queue of the source)")
    .option("--target-queue <q2>", "the queue's name on the target, with one --queue")
    .option("--states <list>", "only jobs that were in these states in the source")
    .action(async (options) => {
      await runVerifyCommand(options, io, adapters);
      done(undefined);
    });
  cli
    .command("bridge")
    .description("the live cutover: keep moving every job that reaches the source to the target until stopped")
    .option("-c, --config <path>", "YAML or JSON configuration naming the backends (env SWITCHYARD_CONFIG)")
    .option("--from <backend>", "the backend producers still write to: a name under `backends:` or a URL")
    .option("--to <backend>", "the backend the workers now consume from: a name or a URL")
    .option("--queue <q>", "one queue, or a pattern (default: every queue of the source, looked up on every pass)")
    .option("--interval <ms>", "how long to wait after a pass that found nothing (default 1000)")
    .option("--batch-size <n>", "jobs per page (default 1000)")
    .option("--id-prefix <p>", "put before each moved job's id in the target, so ids the target gives out meanwhile cannot clash")
    .addHelpText("after", CUTOVER_NOTES)
    .action(async (options) => done(await runCutover(options, io, adapters)));
  cli
    .command("bridge-legacy")
    .description("hand the pending rows of a legacy Worker Queue jobs table to another backend, and write each outcome back to its row")
    .option("-c, --config <path>", "YAML or JSON configuration naming both backends (env SWITCHYARD_CONFIG)")
    .option("--from <backend>", "the workerqueue-sql backend over the legacy jobs table")
    .option("--to <backend>", "the backend whose workers run the jobs now")
    .option("--queue <q>", "the legacy rows' queue (default: the backend's defaultQueue, `default`)")
    .option("--target-queue <q2>", "the queue on the target (default: the same name)")
    .option("--interval <ms>", "between two passes over the table (default 500)")
    .option("--batch-size <n>", "rows claimed per pass (default 100)")
    .option("--lease-ms <ms>", "how long a claimed row stays with the bridge before another reserver may take it (default one day)")
    .option("--worker <name>", "the name the bridge holds rows under; keep it across restarts (default switchyard-bridge)")
    .option("--id-prefix <p>", "put before a row's id to make its job's id on the target (default: the table name and a dash)")
    .option("--metrics-port <n>", "serve the bridge's progress for Prometheus at http://127.0.0.1:<n>/metrics (0: a free port, printed)")
    .option("--once", "stop once every pending row has been handed out and written back")
    .addHelpText("after", BRIDGE_NOTES)
    .action(async (options) => {
      const bridge = await runBridgeCommand(options, io, adapters);
      if (options.once) {
        await bridge.finished;
        done(undefined);
      } else done(bridge);
    });
  return cli;
}

/** Commander's ways of finishing without an error: --help and --version printed what was asked. */
const FINISHED = new Set(["commander.helpDisplayed", "commander.help", "commander.version"]);

/**
 * Parses the command line and runs the command: `serve` resolves with the running server, `migrate`,
 * --help and --version with undefined once done. A failed command rejects with a message for the user.
 */
export async function runCli(
  argv: string[],
  io: CliIo = defaultIo,
  adapters: readonly AdapterDescriptor[] = ADAPTERS,
): Promise<Running | undefined> {
  let result: Running | undefined;
  const cli = program(io, adapters, (running) => {
    result = running;
  });
  if (argv.length === 0) {
    io.out(cli.helpInformation());
    return undefined;
  }
  try {
    await cli.parseAsync(argv, { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      if (FINISHED.has(error.code)) return undefined;
      throw new ConfigError(`${error.message.replace(/^error: /, "")}; try switchyard --help`);
    }
    throw error;
  }
  return result;
}

/** Exits once what was written to stdout and stderr has reached them (pipes are asynchronous on some systems). */
async function exitWhenFlushed(code: number): Promise<void> {
  await Promise.all([process.stdout, process.stderr].map((stream) => new Promise((resolve) => stream.write("", resolve))));
  process.exit(code);
}

/** Runs the CLI as a process: exits non-zero with a readable message on bad input, stops gracefully on signals. */
export async function main(argv = process.argv.slice(2)): Promise<void> {
  let server: Running | undefined;
  // stdout of `migrate` and `bridge-legacy` carries only their JSON; drivers log through console
  // (knex warns on failed connections), so their lines go to stderr with the progress.
  if (["migrate", "verify", "bridge", "bridge-legacy"].includes(argv[0] ?? "")) console.log = console.info = console.warn = console.error;
  try {
    server = await runCli(argv);
  } catch (error) {
    const message = error instanceof ConfigError || error instanceof MigrateError ? error.message : String(error);
    process.stderr.write(`switchyard: ${message}\n`);
    await exitWhenFlushed(1);
    return;
  }
  // A one-shot command (migrate, --help) is done: exit even if a driver left timers behind (an
  // ioredis client of a backend that never became ready keeps reconnecting).
  if (!server) return exitWhenFlushed(0);
  const running = server;
  const stop = (signal: string) => {
    process.stderr.write(`switchyard: ${signal}, finishing (${running.inFlight()} in flight)\n`);
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
