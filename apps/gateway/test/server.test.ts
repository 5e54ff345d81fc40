import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../src/cli.js";
import { type RunningServer, startServer } from "../src/index.js";
import { CLI_FROM_SOURCE, until } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "switchyard-server-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const sqlite = (name: string) => ({ backends: { main: { type: "workerqueue-sql" as const, url: `sqlite:${join(dir, name)}` } } });

describe("HTTP server", () => {
  it("serves over real HTTP and, on close, finishes an in-flight request before closing the backends", async () => {
    const server = await startServer({ config: sqlite("graceful.sqlite"), port: 0, host: "127.0.0.1", env: {} });
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(200);

    // A request whose body is still arriving when shutdown starts: it must still be answered.
    let sendRest!: () => void;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"name": "Slow",'));
        sendRest = () => {
          controller.enqueue(new TextEncoder().encode(' "data": [1]}'));
          controller.close();
        };
      },
    });
    const inFlight = fetch(`${server.url}/v1/queues/slow/jobs`, {
      method: "POST",
      body,
      headers: { "content-type": "application/json" },
      duplex: "half",
    } as RequestInit);
    await until(() => server.inFlight() === 1, "the request to reach the gateway");

    let closed = false;
    const closing = server.close().then(() => {
      closed = true;
    });
    // Shutdown is under way once the port refuses new connections (idle keep-alive ones are swept too).
    const refused = () =>
      fetch(`${server.url}/health`).then(
        () => false,
        () => true,
      );
    await until(refused, "the gateway to stop accepting connections");
    expect(closed).toBe(false);
    sendRest();

    const res = await inFlight;
    expect(res.status).toBe(201);
    expect(((await res.json()) as { job: unknown }).job).toMatchObject({ name: "Slow", data: [1] });
    await closing;
    expect(closed).toBe(true);
    await expect(fetch(`${server.url}/health`)).rejects.toThrow();
    await expect(server.gateway.backends.get("main")!.backend.counts("slow")).rejects.toThrow();
  });

  it("a parked reserve whose client goes away stops waiting, and a job enqueued after is left for others", async () => {
    const server = await startServer({ config: sqlite("gone.sqlite"), port: 0, host: "127.0.0.1", env: {} });
    try {
      const aborted = new AbortController();
      const parked = fetch(`${server.url}/v1/queues/gone/reserve`, {
        method: "POST",
        body: JSON.stringify({ worker: "gone", wait: 20_000 }),
        headers: { "content-type": "application/json" },
        signal: aborted.signal,
      }).catch((error: Error) => error);
      await until(() => server.gateway.wakeups.parked("gone") === 1, "the reserve to park");
      aborted.abort();
      expect(await parked).toBeInstanceOf(Error);
      await until(() => server.gateway.wakeups.parked("gone") === 0, "the reserve to stop waiting");
      const enqueued = await fetch(`${server.url}/v1/queues/gone/jobs`, {
        method: "POST",
        body: JSON.stringify({ name: "left" }),
        headers: { "content-type": "application/json" },
      });
      expect(enqueued.status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await server.gateway.backends.get("main")!.backend.counts("gone")).toMatchObject({ waiting: 1, active: 0 });
    } finally {
      await server.close();
    }
  });
});

describe("CLI", () => {
  it("prints usage for --help", async () => {
    let out = "";
    const server = await runCli(["--help"], {
      out: (t) => {
        out += t;
      },
      err: () => undefined,
      env: {},
    });
    expect(server).toBeUndefined();
    expect(out).toContain("Usage: switchyard [options] [command]");
    for (const command of ["serve", "migrate"]) expect(out).toMatch(new RegExp(`^  ${command} `, "m"));
    for (const door of ["/v1", "/cloudq", "/qless"]) expect(out).toContain(door);
  });

  it("prints every option of a command for `<command> --help`, and the version for --version", async () => {
    let out = "";
    const io = {
      out: (text: string) => {
        out += text;
      },
      err: () => undefined,
      env: {},
    };
    expect(await runCli(["serve", "--help"], io)).toBeUndefined();
    for (const option of ["--port <n>", "--host <addr>", "--config <path>"]) expect(out).toContain(option);
    out = "";
    await runCli(["migrate", "--help"], io);
    for (const option of [
      "--from <backend>",
      "--to <backend>",
      "--queue <q>",
      "--target-queue <q2>",
      "--states <list>",
      "--batch-size <n>",
      "--dry-run",
      "--resume",
      "--checkpoint <file>",
      "--no-verify",
    ])
      expect(out).toContain(option);
    out = "";
    await runCli(["verify", "--help"], io);
    for (const option of ["--from <backend>", "--to <backend>", "--queue <q>", "--states <list>"]) expect(out).toContain(option);
    out = "";
    await runCli(["--version"], io);
    expect(out.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("serve reads --config and --port, and PORT / SWITCHYARD_CONFIG from the environment", async () => {
    const file = join(dir, "cli.json");
    writeFileSync(file, JSON.stringify(sqlite("cli.sqlite")));
    let out = "";
    const io = {
      out: (t: string) => {
        out += t;
      },
      err: () => undefined,
      env: { SWITCHYARD_CONFIG: file, PORT: "0" },
    };
    const server = (await runCli(["serve", "--host", "127.0.0.1"], io)) as RunningServer | undefined;
    try {
      expect(out).toContain(`switchyard listening on ${server!.url}`);
      expect(out).toContain(file);
      const res: Response = await fetch(`${server!.url}/cloudq/cli`, {
        method: "POST",
        body: JSON.stringify({ job: { klass: "K", args: [] } }),
      });
      expect(await res.json()).toEqual({ status: "success" });
    } finally {
      await server?.close();
    }
  });

  it("serve warns when it listens beyond loopback with no auth tokens, and not on loopback", async () => {
    const file = join(dir, "warn.json");
    writeFileSync(file, JSON.stringify(sqlite("warn.sqlite")));
    for (const [host, warned] of [
      ["0.0.0.0", true],
      ["127.0.0.1", false],
    ] as const) {
      let err = "";
      const io = {
        out: () => undefined,
        err: (text: string) => {
          err += text;
        },
        env: { PORT: "0", LOG_LEVEL: "silent" },
      };
      const server = (await runCli(["serve", "--host", host, "--config", file], io)) as RunningServer | undefined;
      await server?.close();
      expect(err.includes("every door is open"), host).toBe(warned);
    }
  });

  it("refuses an unknown command and a bad port with a clear message", async () => {
    const io = { out: () => undefined, err: () => undefined, env: {} };
    await expect(runCli(["launch"], io)).rejects.toThrow(/unknown command 'launch'/);
    await expect(runCli(["serve", "--port", "http"], io)).rejects.toThrow(/--port must be a number/);
  });

  it("the switchyard command runs from source without a build and stops cleanly on SIGTERM", async () => {
    const file = join(dir, "bin.json");
    writeFileSync(file, JSON.stringify(sqlite("bin.sqlite")));
    const child = spawn(process.execPath, [...CLI_FROM_SOURCE, "serve", "--port", "0", "--host", "127.0.0.1", "--config", file], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    child.stderr.on("data", (chunk) => {
      err += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      await until(() => /listening on (http:\/\/\S+)/.test(out) || child.exitCode !== null, "the server to listen", 20_000);
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      expect(url, err).toBeDefined();
      const health = await fetch(`${url}/health`);
      expect(health.status).toBe(200);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
