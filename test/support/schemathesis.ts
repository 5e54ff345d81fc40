import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Schemathesis from PyPI, the property-based fuzzer for OpenAPI documents, installed into a cached
 * virtualenv as the qless interop suite installs qless-py. Pinned: its check names and flags
 * changed between 3.x and 4.x.
 */
export const SCHEMATHESIS_VERSION = "4.32.5";
const REPO_ROOT = join(import.meta.dirname, "../..");
const VENV = join(REPO_ROOT, "node_modules", ".cache", `switchyard-schemathesis-${SCHEMATHESIS_VERSION}`);
const CLI = join(VENV, "bin", "schemathesis");
const SUPPORT = import.meta.dirname;

/** Creates the virtualenv and installs schemathesis unless a previous run did. */
export function installSchemathesis(): void {
  if (existsSync(CLI) && spawnSync(CLI, ["--version"]).stdout?.toString().includes(SCHEMATHESIS_VERSION)) return;
  mkdirSync(join(REPO_ROOT, "node_modules", ".cache"), { recursive: true });
  try {
    execFileSync("python3", ["-m", "venv", "--clear", VENV], { stdio: "inherit" });
    execFileSync(join(VENV, "bin", "python"), ["-m", "pip", "install", "--quiet", `schemathesis==${SCHEMATHESIS_VERSION}`], {
      stdio: "inherit",
    });
  } catch (error) {
    throw new Error(
      `the OpenAPI fuzz test installs schemathesis ${SCHEMATHESIS_VERSION} from PyPI into ${VENV} and could not: ` +
        "it needs python3 with venv and pip (Debian: apt-get install -y python3 python3-venv) and access to PyPI",
      { cause: error },
    );
  }
}

export interface SchemathesisRun {
  code: number | null;
  output: string;
}

/**
 * Runs `schemathesis run` against a served /openapi.json with our settings (schemathesis.toml: a
 * documented 501 is not a server error) and hooks (schemathesis_hooks.py: long polls cut short).
 * It runs in a temporary directory, where it leaves its example database and reports.
 */
export async function runSchemathesis(schemaUrl: string, args: string[]): Promise<SchemathesisRun> {
  const cwd = mkdtempSync(join(tmpdir(), "switchyard-schemathesis-"));
  try {
    const child = spawn(CLI, ["--no-color", "--config-file", join(SUPPORT, "schemathesis.toml"), "run", schemaUrl, ...args], {
      cwd,
      env: {
        ...process.env,
        SCHEMATHESIS_HOOKS: "schemathesis_hooks",
        PYTHONPATH: SUPPORT,
        PYTHONDONTWRITEBYTECODE: "1",
        COLUMNS: "120",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += chunk;
    });
    child.stderr.on("data", (chunk) => {
      output += chunk;
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    return { code, output };
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}
