/**
 * qless-core's own Python suite (243 tests) replayed through the RESP door onto a Worker Queue store,
 * on demand: `npm run bench -- qless-core <seomoz/qless-core checkout> [sqlite|postgres]`. Not part
 * of `npm test`: it needs a checkout of qless-core (GitHub is not reachable from CI) and Python 2.7
 * with redis-py 3.5 and nose (`QLESS_CORE_PYTHON`, default `python2.7`). The checkout is copied, its
 * qless.lua built as its Makefile builds it (Redis 7 forbids the script's global `function
 * table.extend`, made local here), and the suite's FLUSHDB between tests (which the door refuses)
 * becomes a restart of the gateway on a fresh store. Prints how many tests pass, answer 501 (not
 * applicable: the door names what the store lacks) and differ, and names those that differ.
 */
import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { type AddressInfo, createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import knexFactory from "knex";
import { type RunningServer, startServer } from "../apps/gateway/src/server.js";
import { serviceUrl } from "../test/support/services.js";

const [checkout, store = "sqlite"] = process.argv.slice(2);
if (!checkout || (store !== "sqlite" && store !== "postgres")) {
  throw new Error("usage: npm run bench -- qless-core <qless-core checkout> [sqlite|postgres]");
}
const dir = mkdtempSync(join(tmpdir(), "switchyard-qless-core-"));
const suite = join(dir, "qless-core");
cpSync(checkout, suite, { recursive: true });

/** qless.lua as qless-core's Makefile writes it: the library and api.lua, comment lines dropped. */
function buildScript(): string {
  const read = (file: string) => readFileSync(join(suite, file), "utf8");
  const library = ["base.lua", "config.lua", "job.lua", "queue.lua", "recurring.lua", "worker.lua", "api.lua"].map(read).join("");
  const lines = library
    .replace(/^function table\.extend\(self, other\)/m, "local function table_extend(self, other)")
    .replaceAll("table.extend(", "table_extend(")
    .split("\n")
    .filter((line) => !/^\s*--[^[]/.test(line) && line !== "--");
  return ["-- This is a generated file", ...lines].join("\n");
}
writeFileSync(join(suite, "qless.lua"), buildScript());

/** A port free now, kept for every gateway of the run: each test class's client connects to it once. */
async function freePort(): Promise<number> {
  const probe = createTcpServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
const respPort = await freePort();
const controlPort = await freePort();

const recorder = join(suite, "qless.py");
const flush = "        self._client.flushdb()";
if (!readFileSync(recorder, "utf8").includes(flush)) throw new Error(`${recorder}: no FLUSHDB to replace`);
writeFileSync(
  recorder,
  readFileSync(recorder, "utf8").replace(
    flush,
    [
      "        import urllib2",
      `        urllib2.urlopen('http://127.0.0.1:${controlPort}/restart').read()`,
      "        self._client.connection_pool.disconnect()",
      "        self._pubsub = self._client.pubsub()",
    ].join("\n"),
  ),
);

const pg = store === "postgres" ? knexFactory({ client: "pg", connection: serviceUrl("postgres") }) : null;
const tables: string[] = [];
let gateway: RunningServer | undefined;
async function restart(): Promise<void> {
  await gateway?.close();
  const n = tables.length + 1;
  const table = `qless_core_${process.pid}_${n}`;
  tables.push(table);
  const backend = pg
    ? { type: "workerqueue-sql", url: serviceUrl("postgres"), options: { table } }
    : { type: "workerqueue-sql", url: `sqlite:${join(dir, `${table}.sqlite`)}` };
  gateway = await startServer({
    config: { backends: { main: backend }, doors: { resp: { port: respPort } } } as never,
    port: 0,
    host: "127.0.0.1",
    env: {},
  });
}
await restart();
const control = createServer((_request, response) => {
  restart().then(
    () => response.end("ok"),
    (error: Error) => response.writeHead(500).end(error.message),
  );
}).listen(controlPort, "127.0.0.1");

const started = performance.now();
const output = await new Promise<string>((resolve) => {
  const python = spawn(process.env.QLESS_CORE_PYTHON ?? "python2.7", ["-m", "nose", "--exe", "-v", "test"], {
    cwd: suite,
    env: { ...process.env, REDIS_URL: `redis://127.0.0.1:${respPort}/` },
  });
  let text = "";
  python.stdout.on("data", (chunk) => {
    text += chunk;
  });
  python.stderr.on("data", (chunk) => {
    text += chunk;
  });
  python.on("close", () => resolve(text));
});

control.close();
await gateway?.close();
if (pg) {
  for (const table of tables) {
    await pg.schema.dropTableIfExists(table);
    await pg.schema.dropTableIfExists(`${table}_paused_queues`);
    await pg.schema.dropTableIfExists(`${table}_sy_recurring`);
  }
  await pg.destroy();
}
rmSync(dir, { recursive: true, force: true });

// nose -v prints a line per test, then a block per error or failure ending in the exception's line.
const ran = Number(/^Ran (\d+) tests?/m.exec(output)?.[1] ?? 0);
const blocks = output.split(/^={70}$/m).slice(1);
const notApplicable = blocks.filter((block) => /ResponseError: UNSUPPORTED: /.test(block));
const differ = blocks.filter((block) => !notApplicable.includes(block));
process.stdout.write(
  `qless-core suite through the RESP door onto ${store}: ${ran} tests in ${((performance.now() - started) / 1000).toFixed(0)} s: ` +
    `${ran - blocks.length} pass, ${notApplicable.length} not applicable (501), ${differ.length} differ\n`,
);
for (const block of differ) process.stdout.write(`differs: ${block.trim().split("\n")[0]}\n`);
if (ran === 0) process.stdout.write(output);
