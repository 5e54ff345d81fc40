#!/usr/bin/env node
// Lints what each package publishes: publint (package.json against the packed files) and
// "Are the Types Wrong?" (types resolve for Node 16+ ESM and bundlers). Run after `npm run build`.
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..");
const dirs = [
  ...readdirSync(join(ROOT, "packages")).map((name) => join("packages", name)),
  ...readdirSync(join(ROOT, "apps")).map((name) => join("apps", name)),
];
const run = (command, args) => execFileSync("npx", [command, ...args], { cwd: ROOT, stdio: "inherit" });

for (const dir of dirs) {
  process.stderr.write(`[check-packages] ${dir}\n`);
  run("publint", ["run", dir, "--strict"]);
  // The packages are ESM only, as their "type": "module" says; CommonJS consumers use import().
  run("attw", ["--pack", dir, "--profile", "esm-only"]);
}
