import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { qlessScript } from "../../src/script.js";

/** qless-py from PyPI: the real Python qless client, installed into a cached virtualenv. */
export const QLESS_PY_VERSION = "0.11.4";
const REPO_ROOT = join(import.meta.dirname, "../../../..");
const VENV = join(REPO_ROOT, "node_modules", ".cache", `switchyard-qless-py-${QLESS_PY_VERSION}`);
const PYTHON = join(VENV, "bin", "python");
const DRIVER = join(import.meta.dirname, "qless_py_driver.py");

/** Creates the virtualenv and installs qless-py unless a previous run did. */
export function installQlessPy(): void {
  if (existsSync(PYTHON) && spawnSync(PYTHON, ["-c", "import qless"]).status === 0) return;
  mkdirSync(join(REPO_ROOT, "node_modules", ".cache"), { recursive: true });
  try {
    execFileSync("python3", ["-m", "venv", "--clear", VENV], { stdio: "inherit" });
    execFileSync(PYTHON, ["-m", "pip", "install", "--quiet", `qless-py==${QLESS_PY_VERSION}`], { stdio: "inherit" });
  } catch (error) {
    throw new Error(
      `the qless interop tests install qless-py ${QLESS_PY_VERSION} from PyPI into ${VENV} and could not: ` +
        "they need python3 with venv and pip (Debian: apt-get install -y python3 python3-venv) and access to PyPI",
      { cause: error },
    );
  }
}

/** Writes Switchyard's assembled script where qless-py can load it in place of its qless.lua. */
export function writeSwitchyardScript(): string {
  const path = join(VENV, "switchyard-qless.lua");
  writeFileSync(path, qlessScript().source);
  return path;
}

export type PyOp = { op: string; worker?: string; [key: string]: unknown };
export type PyResult = { ok?: unknown; error?: string };

/**
 * Runs operations through qless-py. `script` is "bundled" (qless-py's own qless-core with the
 * Redis 7 fix) or the path of a script to load instead.
 */
export function qlessPy(url: string, script: string, ops: PyOp[]): PyResult[] {
  const out = execFileSync(PYTHON, [DRIVER, url, script], { input: JSON.stringify(ops), encoding: "utf8" });
  return JSON.parse(out) as PyResult[];
}

/** As `qlessPy`, without blocking: for a server in this same process (the gateway's RESP door). */
export function qlessPyAsync(url: string, script: string, ops: PyOp[]): Promise<PyResult[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [DRIVER, url, script], { stdio: ["pipe", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
    });
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(JSON.parse(out) as PyResult[]) : reject(new Error(`qless-py driver exited ${code}`)),
    );
    child.stdin.end(JSON.stringify(ops));
  });
}

/** Runs one operation and returns its value, failing on a qless error. */
export function qlessPyOne(url: string, script: string, op: PyOp): unknown {
  const [result] = qlessPy(url, script, [op]);
  if (!result || result.error !== undefined) throw new Error(`qless-py ${op.op} failed: ${result?.error}`);
  return result.ok;
}
