#!/usr/bin/env node
// `npm test`: installs what is missing, starts throwaway servers on free ports, runs every vitest
// suite against them, and stops them. Extra arguments go to vitest (`npm test -- packages/core`).
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { startServices } from "./services.mjs";

const services = await startServices();
process.stderr.write(
  `[test] servers: ${Object.entries(services.env)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ")}\n`,
);
const stop = () => {
  services.stop();
  setTimeout(() => rmSync(services.dir, { recursive: true, force: true }), 2000).unref();
};
for (const [signal, code] of [
  ["SIGINT", 130],
  ["SIGTERM", 143],
]) {
  process.on(signal, () => {
    stop();
    process.exit(code);
  });
}

const vitest = spawn("npx", ["vitest", "run", ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, ...services.env },
});
vitest.on("exit", (code, signal) => {
  stop();
  process.exitCode = code ?? (signal ? 1 : 0);
});
