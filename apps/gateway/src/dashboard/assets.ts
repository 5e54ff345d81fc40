import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { GatewayEnv } from "../errors.js";

/*
 * The dashboard's files, built by dashboard/build.mjs into dashboard/dist of this package (shipped in
 * the npm tarball). From src/dashboard (the sources, run through tsx) and from dist/dashboard (the
 * built gateway) the folder is the same two levels up.
 */
const PACKAGE_ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const DASHBOARD_DIST = join(PACKAGE_ROOT, "dashboard", "dist");
const BUILD_SCRIPT = join(PACKAGE_ROOT, "dashboard", "build.mjs");

const TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".map": "application/json",
  ".png": "image/png",
};

/** Everything the page loads comes from the gateway itself: no outside network, no inline script. */
const SHELL_HEADERS = {
  "Content-Type": "text/html; charset=utf-8",
  "Cache-Control": "no-cache",
  "Content-Security-Policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
};

/** Asset names carry a content hash, so a browser may keep them for good. */
const ASSET_HEADERS = { "Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff" };

let built: Promise<boolean> | undefined;

/**
 * Whether the files are there. In this repository, where `npm run serve` and the tests run the
 * sources without `npm run build`, a missing build is made once from dashboard/src (esbuild, under a
 * second); an installed package always ships it.
 */
function ensureBuilt(): Promise<boolean> {
  built ??= (async () => {
    if (existsSync(join(DASHBOARD_DIST, "index.html"))) return true;
    if (!existsSync(BUILD_SCRIPT)) return false;
    const { buildDashboard } = (await import(pathToFileURL(BUILD_SCRIPT).href)) as { buildDashboard: () => Promise<unknown> };
    await buildDashboard();
    return existsSync(join(DASHBOARD_DIST, "index.html"));
  })().catch((error: unknown) => {
    built = undefined;
    throw error;
  });
  return built;
}

const NOT_BUILT =
  "<!doctype html><title>Switchyard dashboard</title><p>The dashboard is not built. Run <code>npm run build</code> in the repository.</p>";

async function shell(c: Context<GatewayEnv>): Promise<Response> {
  if (!(await ensureBuilt())) return c.html(NOT_BUILT, 503);
  return c.body(await readFile(join(DASHBOARD_DIST, "index.html")), 200, SHELL_HEADERS);
}

/** Serves the shell for every page (/dashboard, /dashboard/queues/...) and the hashed assets. */
export function mountAssets(app: OpenAPIHono<GatewayEnv>): void {
  app.get("/dashboard/assets/:file", async (c, next) => {
    const file = c.req.param("file");
    const type = TYPES[file.slice(file.lastIndexOf("."))];
    // Plain names only: nothing outside the assets folder can be asked for.
    if (!type || !/^[\w.-]+$/.test(file) || !(await ensureBuilt())) return next();
    try {
      return c.body(await readFile(join(DASHBOARD_DIST, "assets", file)), 200, { ...ASSET_HEADERS, "Content-Type": type });
    } catch {
      return next();
    }
  });
  app.get("/dashboard", shell);
  app.get("/dashboard/*", (c, next) => (c.req.path.startsWith("/dashboard/assets/") ? next() : shell(c)));
}
