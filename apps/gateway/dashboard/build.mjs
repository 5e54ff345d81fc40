#!/usr/bin/env node
// Builds the dashboard (dashboard/src: Preact + plain CSS) with esbuild into dashboard/dist, which the
// gateway serves at /dashboard and the npm tarball ships: index.html plus content-hashed assets.
//
//   node dashboard/build.mjs        (part of the gateway's `npm run build`)
//
// The gateway also calls buildDashboard() itself when it runs from the sources and finds no build.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

const HERE = dirname(fileURLToPath(import.meta.url));
export const DIST = join(HERE, "dist");

/** Builds into a fresh folder and swaps it in, so a server never reads a half-written build. */
export async function buildDashboard({ dist = DIST } = {}) {
  mkdirSync(dirname(dist), { recursive: true });
  const staging = mkdtempSync(join(dirname(dist), ".dist-"));
  try {
    const result = await build({
      entryPoints: { app: join(HERE, "src", "main.tsx") },
      outdir: join(staging, "assets"),
      entryNames: "[name]-[hash]",
      bundle: true,
      minify: true,
      sourcemap: "linked",
      format: "esm",
      target: ["es2020"],
      jsx: "automatic",
      jsxImportSource: "preact",
      legalComments: "none",
      metafile: true,
      logLevel: "warning",
    });
    const outputs = Object.keys(result.metafile.outputs).map((file) => basename(file));
    const script = outputs.find((file) => file.endsWith(".js"));
    const style = outputs.find((file) => file.endsWith(".css"));
    if (!script || !style) throw new Error(`dashboard build: expected a .js and a .css output, got ${outputs.join(", ")}`);
    const html = readFileSync(join(HERE, "src", "index.html"), "utf8")
      .replace("%SCRIPT%", `/dashboard/assets/${script}`)
      .replace("%STYLE%", `/dashboard/assets/${style}`);
    // The same build (names are content hashes) is left in place, so a server reading it is not disturbed.
    if (existsSync(join(dist, "index.html")) && readFileSync(join(dist, "index.html"), "utf8") === html) return { dist, script, style };
    writeFileSync(join(staging, "index.html"), html);
    // mkdtemp makes the folder private; the server (or another user running it) must read it.
    chmodSync(staging, 0o755);
    // Swapped rather than written in place; a concurrent build (two test workers) may win the race.
    const old = `${dist}.old-${process.pid}-${Date.now()}`;
    try {
      renameSync(dist, old);
    } catch {}
    try {
      renameSync(staging, dist);
    } catch {}
    rmSync(old, { recursive: true, force: true });
    return { dist, script, style };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { dist, script, style } = await buildDashboard();
  process.stderr.write(`dashboard: ${script}, ${style} in ${dist}\n`);
}
