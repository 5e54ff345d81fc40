import { type ChildProcess, execFile, spawn } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { eventually } from "@switchyard/conformance";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "./support/services.js";

// What a user gets from npm: every workspace package is built, packed with `npm pack`, and installed
// from those tarballs into an empty project with plain npm (no workspaces, no `source` condition),
// where the adapters, the `switchyard` binary and the published types are used as a user would.
const ROOT = join(import.meta.dirname, "..");
const FIXTURES = join(import.meta.dirname, "packaging");
const run = promisify(execFile);
const INSTALL_MS = 6 * 60_000;

let project: string;

async function npm(args: string[], cwd: string): Promise<string> {
  const { stdout } = await run("npm", [...args, "--no-audit", "--no-fund"], { cwd, maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), "switchyard-packaging-"));
  const tarballs = join(project, "tarballs");
  mkdirSync(tarballs);
  await npm(["run", "build"], ROOT);
  await npm(["pack", "--workspaces", "--pack-destination", tarballs], ROOT);
  // npm 11 runs no install script that the project has not allowed; better-sqlite3 builds its addon in one.
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "packaging-probe", private: true, type: "module", allowScripts: { "better-sqlite3": true } }),
  );
  const { stdout } = await run("sh", ["-c", "ls tarballs/*.tgz"], { cwd: project });
  const packed = stdout
    .trim()
    .split("\n")
    .map((file) => `./${file}`);
  expect(packed).toHaveLength(7);
  await npm(["install", "--prefer-offline", ...packed, "typescript@5.9", "@types/node@20"], project);
}, INSTALL_MS);

afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

describe("packages installed from their npm tarballs into a blank project", () => {
  it("each adapter imports from its built files and runs enqueue -> reserve -> complete on its real server", async () => {
    copyFileSync(join(FIXTURES, "adapters-probe.mjs"), join(project, "adapters-probe.mjs"));
    const { stdout } = await run("node", ["adapters-probe.mjs"], {
      cwd: project,
      env: {
        ...process.env,
        SWITCHYARD_REDIS_URL: serviceUrl("redis"),
        SWITCHYARD_MONGO_URL: serviceUrl("mongo"),
        SWITCHYARD_POSTGRES_URL: serviceUrl("postgres"),
        SWITCHYARD_MYSQL_URL: serviceUrl("mysql"),
        PROBE_SQLITE_FILE: join(project, "probe.sqlite"),
        PROBE_QLESS_URL: `${serviceUrl("redis").replace(/\/\d*$/, "")}/7`,
        PROBE_MONGO_DATABASE: `packaging_${process.pid}`,
      },
    });
    const report = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}");
    for (const name of ["workerqueue-sql:sqlite", "qless-redis", "glidemq-valkey", "cloudq-mongo"]) {
      const cycle = report.cycles[name];
      expect(cycle, name).toMatchObject({ data: { n: 1 }, state: "completed" });
      expect(cycle.reserved, name).toBe(cycle.enqueued);
    }
    // pg and mysql2 are optional peers the user did not install: the error says what to install.
    expect(report.missingDriver.pg).toMatch(/npm install pg\b/);
    expect(report.missingDriver.mysql2).toMatch(/npm install mysql2\b/);
  });

  it("the installed `switchyard serve` starts on SQLite and answers the README's Cloudq curl sequence", async () => {
    const port = await freePort();
    const cwd = join(project, "serve");
    mkdirSync(cwd);
    const server = spawn(join(project, "node_modules", ".bin", "switchyard"), ["serve", "--port", String(port)], { cwd });
    const exited = new Promise<number | null>((resolve) => server.once("exit", (code) => resolve(code)));
    try {
      const base = `http://127.0.0.1:${port}/cloudq/archive_queue`;
      await eventually(
        () =>
          fetch(`http://127.0.0.1:${port}/health`).then(
            (r) => r.ok,
            () => false,
          ),
        "the gateway to answer /health",
      );
      const publish = await fetch(base, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ job: { klass: "Archive", args: [{ data: "foobar" }] } }),
      });
      expect(await publish.json()).toEqual({ status: "success" });
      const reserved = (await (await fetch(base)).json()) as { klass: string; args: unknown; id: string };
      expect(reserved).toMatchObject({ klass: "Archive", args: [{ data: "foobar" }] });
      expect(await (await fetch(`${base}/${reserved.id}`, { method: "DELETE" })).json()).toEqual({ status: "success" });
      expect(await (await fetch(base)).json()).toEqual({ status: "empty" });
      // The dashboard ships built inside the package: its page and its script, with no build step here.
      const shell = await (await fetch(`http://127.0.0.1:${port}/dashboard`)).text();
      const script = /src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(shell)?.[1];
      expect(script).toBeDefined();
      expect((await fetch(`http://127.0.0.1:${port}${script}`)).status).toBe(200);
    } finally {
      stop(server);
    }
    expect(await exited).toBe(0);
  });

  it("a TypeScript file importing the public types typechecks against the installed .d.ts files (skipLibCheck off)", async () => {
    copyFileSync(join(FIXTURES, "public-types.ts"), join(project, "public-types.ts"));
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "es2022",
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ["node"],
        },
        files: ["public-types.ts"],
      }),
    );
    const result = await run(join(project, "node_modules", ".bin", "tsc"), ["-p", "."], { cwd: project }).then(
      ({ stdout }) => ({ ok: true, output: stdout }),
      (error: { stdout?: string }) => ({ ok: false, output: error.stdout ?? String(error) }),
    );
    expect(result.output).toBe("");
    expect(result.ok).toBe(true);
    // tsc reads every installed package's types (skipLibCheck off): slow on a 2-core machine under load.
  }, 120_000);
});

function stop(child: ChildProcess): void {
  if (child.exitCode === null) child.kill("SIGTERM");
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}
