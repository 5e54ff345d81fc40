/**
 * What several benches do the same way: start a server (the gateway) in a process of its own, send
 * it JSON requests over kept-alive connections, and read the CPU time a process or the Redis server
 * has used, which a busy shared machine skews far less than the wall-clock rate. (Not the tests'
 * gateway-process.ts: that one waits with vitest's helpers.)
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import type { Job } from "@switchyard/core";
import type { Redis } from "ioredis";
import { CLI_FROM_SOURCE } from "../apps/gateway/test/helpers.js";
import { serviceUrl } from "../test/support/services.js";

/** A server in a process of its own, as the gateway runs in production; resolves once it listens. */
export async function startProcess(args: string[]): Promise<{ url: string; pid: number; stop: () => void }> {
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
    if (url) return { url, pid: child.pid as number, stop: () => child.kill("SIGTERM") };
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`${args.join(" ")} did not start: ${out}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** `switchyard serve` on the store under test. */
export function startGateway(spec: unknown) {
  const config = join(mkdtempSync(join(tmpdir(), "switchyard-bench-")), "config.json");
  // A minute per backend call: a slow store (Cloudq's reserve on FerretDB under 10 racers) is measured, not refused.
  writeFileSync(config, JSON.stringify({ backends: { main: { ...(spec as object), timeoutMs: 60_000 } } }));
  return startProcess([...CLI_FROM_SOURCE, "serve", "--config", config, "--host", "127.0.0.1", "--port", "0", "--log-level", "warn"]);
}

// Node's http client with keep-alive: fetch (undici) would add ~0.4 ms of its own to every request.
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** One JSON request over a kept-alive connection; its parsed answer. */
export function http(
  server: { url: string },
  method: string,
  path: string,
  body?: unknown,
): Promise<{ jobs?: Job[]; job?: Job; next?: Job[] }> {
  const { hostname, port } = new URL(server.url);
  const payload = body === undefined ? "" : JSON.stringify(body);
  const headers = { "content-type": "application/json", "content-length": Buffer.byteLength(payload) };
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, method, agent, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => {
        if ((res.statusCode ?? 500) >= 300) reject(new Error(`${method} ${path}: ${res.statusCode} ${text}`));
        else resolve(JSON.parse(text));
      });
    });
    req.on("error", (error: NodeJS.ErrnoException) => {
      // A kept-alive socket that the server closed (idle) just as this request went out on it: sent
      // again on a new one, as Node's documentation advises; the server had not read it.
      if (req.reusedSocket && error.code === "ECONNRESET") http(server, method, path, body).then(resolve, reject);
      else reject(error);
    });
    req.end(payload);
  });
}

/** CPU time (user + system) the Redis server has used, in µs (INFO cpu). */
export async function redisCpuMicros(redis: Redis): Promise<number> {
  const info = await redis.info("cpu");
  const seconds = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (seconds("used_cpu_user") + seconds("used_cpu_sys")) * 1e6;
}

/** A process's /proc/<pid>/stat fields after its name, the first (index 0) being its state. */
function statFields(pid: number): string[] {
  return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
}

/** CPU time (user + system) a process of this machine has used, in µs (/proc, 100 Hz ticks). */
export function processCpuMicros(pid: number): number {
  const fields = statFields(pid);
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** The processes of this machine, with their parent and command line. */
function processes(): Array<{ pid: number; ppid: number; cmdline: string }> {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((entry) => {
      try {
        const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ");
        return [{ pid: Number(entry), ppid: Number(statFields(Number(entry))[1]), cmdline }];
      } catch {
        return []; // gone meanwhile
      }
    });
}

/** The main processes of a server: the program `name` (a path, or a name with a version after it) given `port`. */
export function serverPids(name: string, port: string): number[] {
  return processes()
    .filter(({ cmdline }) => basename(cmdline.split(" ")[0] ?? "").startsWith(name) && cmdline.includes(port))
    .map(({ pid }) => pid);
}

/**
 * CPU time of a server and its children, in µs: PostgreSQL works in a process per connection, and
 * the main process's own figures include its children that have ended (cutime, cstime).
 */
export function treeCpuMicros(root: number): number {
  const rootFields = statFields(root);
  let sum = (Number(rootFields[13]) + Number(rootFields[14])) * 10_000 + processCpuMicros(root);
  for (const child of processes().filter((process) => process.ppid === root)) {
    try {
      sum += processCpuMicros(child.pid);
    } catch {
      // ended between the listing and the read: its time is in the root's figures by now
    }
  }
  return sum;
}

/** The time a GET of `path` took to answer in full, in ms; an answer that is not 2xx throws. */
export async function timedGet(server: { url: string }, path: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(new URL(path, server.url));
  await response.text();
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return performance.now() - started;
}

/** The benches' own Redis database, which each flushes before and after. */
export const benchRedisUrl = () => `${serviceUrl("redis").replace(/\/\d*$/, "")}/14`;
