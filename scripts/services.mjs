#!/usr/bin/env node
// Throwaway storage servers for the test suites: Redis (standalone and a 3-master cluster),
// PostgreSQL, MariaDB and FerretDB (MongoDB wire protocol). Each runs on a free loopback port in a
// temporary directory. What is missing is installed first (apt-get, go build from the Go proxy).
//
//   node scripts/services.mjs start [names...]   start in the background, write .services/env.json
//   node scripts/services.mjs stop               stop what `start` started
//   node scripts/services.mjs install            only install what is missing
//
// scripts/test.mjs uses startServices()/stopServices() directly around one vitest run.
// Tests that stop and restart servers of their own (test/support/private-servers.ts) reuse launch(),
// waitForPort(), pgBin(), postgresUser() and FERRETDB_BIN; their types are in services.d.mts.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ALL_SERVICES = ["redis", "redis-cluster", "postgres", "mariadb", "ferretdb"];
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const STATE_DIR = join(ROOT, ".services");
const FERRETDB_VERSION = "v1.24.2";
export const FERRETDB_BIN = join(homedir(), ".cache", "switchyard", `ferretdb-${FERRETDB_VERSION}`);
const PG_BIN_DIRS = ["/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"];

const log = (message) => process.stderr.write(`[services] ${message}\n`);

function which(command) {
  const found = spawnSync("sh", ["-c", `command -v ${command}`], { encoding: "utf8" });
  return found.status === 0 ? found.stdout.trim() : null;
}

export function pgBin(tool) {
  for (const dir of PG_BIN_DIRS) if (existsSync(join(dir, tool))) return join(dir, tool);
  return which(tool);
}

function howToInstall(what) {
  return `${what} is missing and could not be installed here. Install it as root with: ${INSTALL_HINT}`;
}
const INSTALL_HINT =
  "apt-get update && apt-get install -y redis-server redis-tools postgresql mariadb-server python3-venv chromium, and Go for FerretDB " +
  `(the test command builds github.com/FerretDB/FerretDB/cmd/ferretdb@${FERRETDB_VERSION} from the Go module proxy)`;

/** Installs the Debian packages and FerretDB that the chosen services need, if they are missing. */
export function installMissing(names = ALL_SERVICES) {
  const packages = new Set();
  if ((names.includes("redis") || names.includes("redis-cluster")) && (!which("redis-server") || !which("redis-cli")))
    packages.add("redis-server").add("redis-tools");
  // The qless interop suite runs the real qless-py client from PyPI in a virtualenv.
  if (names.includes("redis") && spawnSync("python3", ["-m", "venv", "--help"], { stdio: "ignore" }).status !== 0)
    packages.add("python3").add("python3-venv");
  if ((names.includes("postgres") || names.includes("ferretdb")) && (!pgBin("initdb") || !pgBin("postgres") || !pgBin("psql")))
    packages.add("postgresql");
  if (names.includes("mariadb") && (!(which("mariadbd") || which("mysqld")) || !which("mariadb-install-db")))
    packages.add("mariadb-server");
  // The dashboard's browser suite (apps/gateway/test/dashboard.e2e.test.ts) drives Debian's chromium
  // with playwright-core: browser downloads do not work here. It runs on Redis, so it comes with it.
  if (names.includes("redis") && !which("chromium")) packages.add("chromium");
  if (packages.size > 0) {
    if (process.getuid?.() !== 0 || !which("apt-get")) throw new Error(howToInstall([...packages].join(", ")));
    log(`installing ${[...packages].join(" ")} with apt-get`);
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
    execFileSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...packages], { stdio: "inherit", env });
  }
  if (names.includes("ferretdb") && !existsSync(FERRETDB_BIN)) buildFerretDb();
}

// FerretDB's main panics unless build/version/version.txt names its version, a file its release
// tooling writes and the module zip lacks. So the module is downloaded from the Go proxy, copied out
// of the read-only module cache, given that file, and built: same source, same version.
function buildFerretDb() {
  if (!which("go")) throw new Error(howToInstall("go (to build FerretDB)"));
  log(`building FerretDB ${FERRETDB_VERSION} from the Go module proxy (a few minutes, once)`);
  const work = mkdtempSync(join(tmpdir(), "ferretdb-build-"));
  const env = { ...process.env, GOFLAGS: "-mod=mod" };
  const go = (cwd, ...args) => execFileSync("go", args, { cwd, env, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  go(work, "mod", "init", "switchyard.local/ferretdb-build");
  const { Dir } = JSON.parse(go(work, "mod", "download", "-json", `github.com/FerretDB/FerretDB@${FERRETDB_VERSION}`));
  const source = join(work, "src");
  execFileSync("cp", ["-r", Dir, source]);
  execFileSync("chmod", ["-R", "u+w", source]);
  writeFileSync(join(source, "build", "version", "version.txt"), `${FERRETDB_VERSION}\n`);
  mkdirSync(dirname(FERRETDB_BIN), { recursive: true });
  go(source, "build", "-o", FERRETDB_BIN, "./cmd/ferretdb");
  rmSync(work, { recursive: true, force: true });
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Whether nothing listens on `port` of the loopback. */
function portIsFree(port) {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.on("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * A free port for a Redis Cluster node: a node also listens on its cluster bus, its port + 10000,
 * and exits when that one is taken (a client's ephemeral port, say) or past 65535.
 */
export async function freeClusterPort() {
  for (;;) {
    const port = await freePort();
    if (port + 10000 <= 65535 && (await portIsFree(port + 10000))) return port;
  }
}

export async function waitForPort(port, what, child, seconds = 60) {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null)
      throw new Error(`${what} exited with code ${child.exitCode} before listening:\n${readFileSync(child.logFile, "utf8").slice(-2000)}`);
    const open = await new Promise((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${what} did not listen on port ${port} within ${seconds}s`);
}

export function launch(command, args, { dir, name, detached, user }) {
  const logFile = join(dir, `${name}.log`);
  const fd = openSync(logFile, "a");
  const [bin, argv] = user ? ["runuser", ["-u", user, "--", command, ...args]] : [command, args];
  const child = spawn(bin, argv, { stdio: ["ignore", fd, fd], detached });
  closeSync(fd);
  if (detached) child.unref();
  child.logFile = logFile;
  return child;
}

// Postgres refuses to run as root, so as root it runs as the `postgres` user (created if absent).
export function postgresUser() {
  if (process.getuid?.() !== 0) return undefined;
  if (spawnSync("id", ["-u", "postgres"]).status !== 0) execFileSync("useradd", ["--system", "--no-create-home", "postgres"]);
  return "postgres";
}

const starters = {
  async redis(dir, detached) {
    const port = await freePort();
    const child = launch(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
      { dir, name: "redis", detached },
    );
    await waitForPort(port, "redis-server", child);
    return { children: [child], env: { SWITCHYARD_REDIS_URL: `redis://127.0.0.1:${port}` } };
  },

  async "redis-cluster"(dir, detached) {
    const ports = [await freeClusterPort(), await freeClusterPort(), await freeClusterPort()];
    const children = [];
    for (const port of ports) {
      const nodeDir = join(dir, `cluster-${port}`);
      mkdirSync(nodeDir);
      const args = [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        nodeDir,
      ];
      children.push(launch("redis-server", args, { dir, name: `redis-cluster-${port}`, detached }));
    }
    for (const [i, port] of ports.entries()) await waitForPort(port, "redis-server (cluster)", children[i]);
    execFileSync("redis-cli", ["--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "0", "--cluster-yes"], {
      stdio: "ignore",
    });
    const deadline = Date.now() + 30_000;
    while (!execFileSync("redis-cli", ["-p", String(ports[0]), "cluster", "info"], { encoding: "utf8" }).includes("cluster_state:ok")) {
      if (Date.now() > deadline) throw new Error("redis cluster did not reach cluster_state:ok");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    return { children, env: { SWITCHYARD_REDIS_CLUSTER_NODES: ports.map((p) => `127.0.0.1:${p}`).join(",") } };
  },

  async postgres(dir, detached) {
    const port = await freePort();
    const data = join(dir, "pgdata");
    mkdirSync(data);
    const user = postgresUser();
    if (user) execFileSync("chown", ["-R", user, dir]);
    const runAs = (tool, args) =>
      execFileSync(user ? "runuser" : tool, user ? ["-u", user, "--", tool, ...args] : args, { stdio: "ignore" });
    runAs(pgBin("initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
    const args = [
      "-D",
      data,
      "-p",
      String(port),
      "-k",
      dir,
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "fsync=off",
      "-c",
      "max_connections=200",
    ];
    const child = launch(pgBin("postgres"), args, { dir, name: "postgres", detached, user });
    await waitForPort(port, "postgres", child);
    return { children: [child], env: { SWITCHYARD_POSTGRES_URL: `postgres://postgres@127.0.0.1:${port}/postgres` } };
  },

  async mariadb(dir, detached) {
    const port = await freePort();
    const data = join(dir, "mariadb");
    mkdirSync(data);
    const user = process.getuid?.() === 0 ? ["--user=root"] : [];
    execFileSync(
      which("mariadb-install-db"),
      [`--datadir=${data}`, "--auth-root-authentication-method=normal", "--skip-test-db", ...user],
      { stdio: "ignore" },
    );
    const server = which("mariadbd") ?? which("mysqld");
    const args = [
      `--datadir=${data}`,
      `--port=${port}`,
      "--bind-address=127.0.0.1",
      `--socket=${join(dir, "mariadb.sock")}`,
      `--pid-file=${join(dir, "mariadb.pid")}`,
      "--skip-log-bin",
      "--innodb-flush-log-at-trx-commit=0",
      "--max-connections=300",
      ...user,
    ];
    const child = launch(server, args, { dir, name: "mariadb", detached });
    await waitForPort(port, "mariadbd", child);
    const client = which("mariadb") ?? which("mysql");
    execFileSync(client, ["-h", "127.0.0.1", "-P", String(port), "-u", "root", "-e", "CREATE DATABASE IF NOT EXISTS switchyard"], {
      stdio: "ignore",
    });
    return { children: [child], env: { SWITCHYARD_MYSQL_URL: `mysql://root@127.0.0.1:${port}/switchyard` } };
  },

  // FerretDB stores its collections in our PostgreSQL: its SQLite handler decodes whole collections
  // for sorted queries and crashed (SIGBUS in the WAL) under the concurrent-reserve suites.
  async ferretdb(dir, detached, started) {
    const postgresUrl = started.SWITCHYARD_POSTGRES_URL;
    if (!postgresUrl) throw new Error("ferretdb needs the postgres service started first");
    const { port: pgPort } = new URL(postgresUrl);
    execFileSync(pgBin("psql"), ["-h", "127.0.0.1", "-p", pgPort, "-U", "postgres", "-q", "-c", "CREATE DATABASE ferretdb"], {
      stdio: "ignore",
    });
    const port = await freePort();
    const data = join(dir, "ferretdb");
    mkdirSync(data);
    const args = [
      "--handler=postgresql",
      `--postgresql-url=postgres://postgres@127.0.0.1:${pgPort}/ferretdb`,
      `--listen-addr=127.0.0.1:${port}`,
      "--telemetry=disable",
      `--state-dir=${data}`,
      "--log-level=warn",
      "--debug-addr=-",
    ];
    const child = launch(FERRETDB_BIN, args, { dir, name: "ferretdb", detached });
    await waitForPort(port, "ferretdb", child);
    return { children: [child], env: { SWITCHYARD_MONGO_URL: `mongodb://127.0.0.1:${port}/` } };
  },
};

/** Starts the named services; returns their env vars and a stop function. */
export async function startServices(names = ALL_SERVICES, { detached = false } = {}) {
  installMissing(names);
  const dir = mkdtempSync(join(tmpdir(), "switchyard-services-"));
  const env = {};
  const children = [];
  const stop = () => {
    for (const child of children) if (child.exitCode === null) child.kill("SIGTERM");
  };
  const record = (service) => {
    Object.assign(env, service.env);
    children.push(...service.children);
  };
  // FerretDB runs on the PostgreSQL service, so it starts last, once that one listens.
  const first = names.filter((name) => name !== "ferretdb");
  if (names.includes("ferretdb") && !first.includes("postgres")) first.push("postgres");
  try {
    const started = await Promise.allSettled(first.map((name) => starters[name](dir, detached, env)));
    for (const result of started) if (result.status === "fulfilled") record(result.value);
    const failed = started.find((result) => result.status === "rejected");
    if (failed) throw failed.reason;
    if (names.includes("ferretdb")) record(await starters.ferretdb(dir, detached, env));
  } catch (error) {
    stop();
    throw error;
  }
  return { env, dir, pids: children.map((c) => c.pid), stop };
}

async function main() {
  const [command = "start", ...rest] = process.argv.slice(2);
  const names = rest.length > 0 ? rest : ALL_SERVICES;
  for (const name of names) if (!ALL_SERVICES.includes(name)) throw new Error(`unknown service ${name}; known: ${ALL_SERVICES.join(", ")}`);
  if (command === "install") return installMissing(names);
  if (command === "stop") return stopDetached();
  if (command !== "start") throw new Error("usage: node scripts/services.mjs start|stop|install [service...]");
  stopDetached();
  const { env, dir, pids } = await startServices(names, { detached: true });
  mkdirSync(STATE_DIR, { recursive: true });
  writeFileSync(join(STATE_DIR, "env.json"), `${JSON.stringify({ ...env, pids, dir }, null, 2)}\n`);
  process.stdout.write(
    Object.entries(env)
      .map(([k, v]) => `export ${k}=${v}`)
      .join("\n") + "\n",
  );
  log(`started; tests read ${join(STATE_DIR, "env.json")} when these variables are unset. Stop with: npm run services -- stop`);
  process.exit(0);
}

function stopDetached() {
  const file = join(STATE_DIR, "env.json");
  if (!existsSync(file)) return;
  const { pids = [], dir } = JSON.parse(readFileSync(file, "utf8"));
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {}
  }
  rmSync(file);
  const alive = (pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const deadline = Date.now() + 15_000;
  while (pids.some(alive) && Date.now() < deadline) spawnSync("sleep", ["0.1"]);
  if (dir) rmSync(dir, { recursive: true, force: true });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error) => {
    log(error.message);
    process.exit(1);
  });
}
