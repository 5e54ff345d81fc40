/**
 * The HTTP baseline of `npm run bench`: a bare Hono app on @hono/node-server, in a process of its
 * own as the gateway runs, answering a POST with the JSON it was sent. Prints its URL once listening.
 */
import { serve } from "@hono/node-server";
import { Hono } from "hono";

const app = new Hono();
app.post("/*", async (c) => c.json({ job: await c.req.json() }, 201));
const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => {
  process.stdout.write(`listening on http://127.0.0.1:${info.port}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
