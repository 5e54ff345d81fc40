import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  FERRETDB_BIN,
  type LaunchedChild,
  freeClusterPort,
  freePort,
  installMissing,
  launch,
  pgBin,
  postgresUser,
  waitForPort,
} from "../../scripts/services.mjs";

/**
 * Storage servers a test owns, so it may stop and restart them under traffic without disturbing the
 * shared servers other suites use at the same time. Each keeps its port and its data across a
 * restart, as a server restarted by its operator would. Started with scripts/services.mjs's helpers.
 */
export interface PrivateServer {
  /** The URL a backend connects with. */
  url: string;
  port: number;
  /** Stops the server abruptly (as a crash would: no shutdown work) and waits until it is gone. */
  crash(): Promise<void>;
  /** Starts it again on the same port with the same data, and waits until it listens. */
  start(): Promise<void>;
  /** Stops it for good and deletes its data. */
  dispose(): Promise<void>;
}

const gone = (child: LaunchedChild) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((resolve) => child.once("exit", () => resolve()));

/** A server process started by `spawnIt` on `port`, stopped by `crashIt`. */
function restartable(
  what: string,
  url: string,
  port: number,
  dir: string,
  spawnIt: () => LaunchedChild,
  crashIt: (child: LaunchedChild) => void,
): PrivateServer {
  let child: LaunchedChild | undefined;
  const server: PrivateServer = {
    url,
    port,
    async start() {
      child = spawnIt();
      await waitForPort(port, what, child, 30);
    },
    async crash() {
      if (!child) return;
      const stopping = child;
      crashIt(stopping);
      await gone(stopping);
      child = undefined;
    },
    async dispose() {
      await server.crash();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}

/**
 * A redis-server with an append-only file: Redis writes each command to it before it replies, so a
 * write it acknowledged survives SIGKILL. Crashed with SIGKILL.
 */
export async function privateRedis(): Promise<PrivateServer> {
  installMissing(["redis"]);
  const dir = mkdtempSync(join(tmpdir(), "switchyard-private-redis-"));
  const port = await freePort();
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--dir",
    dir,
  ];
  const server = restartable(
    "private redis-server",
    `redis://127.0.0.1:${port}`,
    port,
    dir,
    () => launch("redis-server", args, { dir, name: "redis" }),
    (child) => child.kill("SIGKILL"),
  );
  await server.start();
  return server;
}

/**
 * A PostgreSQL cluster of its own (initdb), crashed with an immediate shutdown: SIGQUIT to the
 * postmaster, which ends every backend at once and leaves crash recovery to the next start. (A
 * SIGKILL would leave its backends holding the shared memory, and it would refuse to start again.)
 */
export async function privatePostgres(): Promise<PrivateServer> {
  installMissing(["postgres"]);
  const dir = mkdtempSync(join(tmpdir(), "switchyard-private-postgres-"));
  const data = join(dir, "pgdata");
  mkdirSync(data);
  const user = postgresUser();
  if (user) execFileSync("chown", ["-R", user, dir]);
  const initdb = pgBin("initdb")!;
  const initArgs = ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"];
  execFileSync(user ? "runuser" : initdb, user ? ["-u", user, "--", initdb, ...initArgs] : initArgs, { stdio: "ignore" });
  const port = await freePort();
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
    "max_connections=100",
  ];
  const server = restartable(
    "private postgres",
    `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dir,
    () => launch(pgBin("postgres")!, args, { dir, name: "postgres", user }),
    // As root the child is runuser, which would turn the signal into SIGTERM: signal the postmaster itself.
    () => process.kill(Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]), "SIGQUIT"),
  );
  await server.start();
  return server;
}

/**
 * A FerretDB process of its own, storing in a database of its own on the shared PostgreSQL service
 * (FerretDB keeps no data itself, so only the process is private). Crashed with SIGKILL.
 */
export async function privateFerretDb(postgresUrl: string): Promise<PrivateServer> {
  installMissing(["ferretdb"]);
  const dir = mkdtempSync(join(tmpdir(), "switchyard-private-ferretdb-"));
  const database = `ferretdb_${Math.random().toString(36).slice(2, 10)}`;
  const { port: pgPort } = new URL(postgresUrl);
  execFileSync(pgBin("psql")!, ["-h", "127.0.0.1", "-p", pgPort, "-U", "postgres", "-q", "-c", `CREATE DATABASE ${database}`], {
    stdio: "ignore",
  });
  const port = await freePort();
  const state = join(dir, "state");
  mkdirSync(state);
  const args = [
    "--handler=postgresql",
    `--postgresql-url=postgres://postgres@127.0.0.1:${pgPort}/${database}`,
    `--listen-addr=127.0.0.1:${port}`,
    "--telemetry=disable",
    `--state-dir=${state}`,
    "--log-level=warn",
    "--debug-addr=-",
  ];
  const server = restartable(
    "private ferretdb",
    `mongodb://127.0.0.1:${port}/`,
    port,
    dir,
    () => launch(FERRETDB_BIN, args, { dir, name: "ferretdb" }),
    (child) => child.kill("SIGKILL"),
  );
  await server.start();
  const dispose = server.dispose;
  server.dispose = async () => {
    await dispose();
    execFileSync(pgBin("psql")!, ["-h", "127.0.0.1", "-p", pgPort, "-U", "postgres", "-q", "-c", `DROP DATABASE IF EXISTS ${database}`], {
      stdio: "ignore",
    });
  };
  return server;
}

/** A Redis Cluster of this test's own: three primaries, each with one replica. */
export interface PrivateRedisCluster {
  /** `host:port,...` of every node, as the glidemq-valkey backend takes them. */
  seeds: string;
  /** `CLUSTER NODES` as read from a node that is up: each node's port, role and whether it is failed. */
  nodes(): Array<{ port: number; role: "master" | "slave"; failed: boolean; id: string; masterId: string }>;
  /** The port of the primary serving `key`'s slot now. */
  primaryFor(key: string): number;
  /** Kills one node with SIGKILL, as a crashed machine would stop answering. */
  crash(port: number): Promise<void>;
  dispose(): Promise<void>;
}

/**
 * Six redis-servers of a cluster, started and joined with `--cluster-replicas 1`. A port another
 * process took between its choice and the node's start (its bus port included) makes the creation
 * fail: the nodes are then stopped and started again on other ports, up to three times.
 */
async function startClusterNodes(dir: string, nodeTimeoutMs: number): Promise<{ ports: number[]; children: Map<number, LaunchedChild> }> {
  for (let attempt = 1; ; attempt++) {
    const ports: number[] = [];
    while (ports.length < 6) {
      const port = await freeClusterPort();
      if (!ports.includes(port)) ports.push(port);
    }
    const children = new Map<number, LaunchedChild>();
    try {
      for (const port of ports) {
        const nodeDir = join(dir, String(port));
        mkdirSync(nodeDir);
        const args = ["--port", String(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"];
        args.push("--cluster-node-timeout", String(nodeTimeoutMs), "--save", "", "--appendonly", "no", "--dir", nodeDir);
        children.set(port, launch("redis-server", args, { dir, name: `node-${port}` }));
      }
      for (const port of ports) await waitForPort(port, "private redis-server (cluster)", children.get(port), 30);
      execFileSync(
        "redis-cli",
        ["--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "1", "--cluster-yes"],
        {
          stdio: "ignore",
        },
      );
      return { ports, children };
    } catch (error) {
      for (const child of children.values()) {
        child.kill("SIGKILL");
        await gone(child);
      }
      if (attempt === 3) throw error;
    }
  }
}

/**
 * Six redis-servers made into a cluster with `--cluster-replicas 1`. A short cluster-node-timeout
 * lets a replica take over a failed primary within a few seconds.
 */
export async function privateRedisCluster(nodeTimeoutMs = 1_000): Promise<PrivateRedisCluster> {
  installMissing(["redis-cluster"]);
  const dir = mkdtempSync(join(tmpdir(), "switchyard-private-cluster-"));
  const { ports, children } = await startClusterNodes(dir, nodeTimeoutMs);
  const cli = (port: number, ...args: string[]) => execFileSync("redis-cli", ["-p", String(port), ...args], { encoding: "utf8" });
  const alive = () => ports.find((port) => children.get(port)?.exitCode === null && children.get(port)?.signalCode === null)!;
  const cluster: PrivateRedisCluster = {
    seeds: ports.map((port) => `127.0.0.1:${port}`).join(","),
    nodes: () =>
      cli(alive(), "cluster", "nodes")
        .trim()
        .split("\n")
        .map((line) => {
          const [id, address, flags, masterId] = line.split(" ");
          return {
            id: id!,
            port: Number(/:(\d+)@/.exec(address!)![1]),
            role: flags!.includes("master") ? ("master" as const) : ("slave" as const),
            failed: flags!.includes("fail"),
            masterId: masterId!,
          };
        }),
    primaryFor(key) {
      const slot = Number(cli(alive(), "cluster", "keyslot", key).trim());
      const ranges = JSON.parse(cli(alive(), "--json", "cluster", "slots")) as Array<[number, number, [string, number]]>;
      return ranges.find(([from, to]) => slot >= from && slot <= to)![2][1];
    },
    async crash(port) {
      const child = children.get(port)!;
      child.kill("SIGKILL");
      await gone(child);
    },
    async dispose() {
      for (const child of children.values()) {
        child.kill("SIGKILL");
        await gone(child);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  // Ready once the cluster is whole and each primary has a replica that is in sync with it.
  const inSync = () => {
    const replicas = cluster.nodes().filter((node) => node.role === "slave");
    return replicas.length === 3 && replicas.every((node) => cli(node.port, "info", "replication").includes("master_link_status:up"));
  };
  const deadline = Date.now() + 30_000;
  while (!(cli(ports[0]!, "cluster", "info").includes("cluster_state:ok") && inSync())) {
    if (Date.now() > deadline) throw new Error("the private redis cluster did not become ready");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return cluster;
}
