import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { Hono } from "hono";
import type { GatewayEnv } from "./errors.js";

/**
 * The API reference at /docs: Swagger UI from the `swagger-ui-dist` package, its assets served by
 * the gateway itself from node_modules, so the page works with no outside network.
 */
const ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "favicon-32x32.png": "image/png",
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Switchyard API reference</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
  <div id="reference"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/init.js"></script>
</body>
</html>
`;

const INIT = `window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#reference", deepLinking: true });\n`;

export function mountReference(app: Hono<GatewayEnv>): void {
  const dir = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist"));
  app.get("/docs", (c) => c.html(PAGE));
  app.get("/docs/assets/init.js", (c) => c.body(INIT, 200, { "content-type": "text/javascript; charset=utf-8" }));
  app.get("/docs/assets/:file", async (c) => {
    const file = c.req.param("file");
    const type = ASSETS[file];
    if (!type) return c.notFound();
    return c.body(await readFile(join(dir, file)), 200, { "content-type": type, "cache-control": "public, max-age=86400" });
  });
}
