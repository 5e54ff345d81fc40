import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreName, openStore, redisUrl } from "./matrix-backends.js";
import { type GatewayProcess, startGatewayProcess } from "./support/gateway-process.js";
import { SCHEMATHESIS_VERSION, installSchemathesis, runSchemathesis } from "./support/schemathesis.js";

/**
 * Every operation /openapi.json documents, fuzzed by schemathesis with a fixed seed and a bounded
 * budget of examples: valid and invalid inputs, boundary values, and stateful sequences that follow
 * the document's links. No answer may be a 5xx (but the documented 501 of an operation the backend
 * cannot honour), and every answer must match the schema documented for its status. Run against a
 * gateway on each kind of store the doors treat differently: SQL (Worker Queue's own), glide-mq's
 * and qless's layouts on Redis (database 15, this suite's alone).
 */
// CI's budget; a longer hunt: SWITCHYARD_FUZZ_SEED=<n> SWITCHYARD_FUZZ_EXAMPLES=100 npx vitest run test/fuzz-openapi.test.ts,
// and SWITCHYARD_FUZZ_STORES=postgres,mysql,cloudq to fuzz those stores too.
const SEED = process.env.SWITCHYARD_FUZZ_SEED ?? "20240514";
const MAX_EXAMPLES = process.env.SWITCHYARD_FUZZ_EXAMPLES ?? "5";
const dir = mkdtempSync(join(tmpdir(), "switchyard-fuzz-openapi-"));
const extraStores = (process.env.SWITCHYARD_FUZZ_STORES ?? "").split(",").filter((name) => name !== "") as StoreName[];
const opened = extraStores.map((name) => openStore(name));
const STORES = [
  { name: "workerqueue-sql on SQLite", backend: { type: "workerqueue-sql", url: `sqlite:${join(dir, "fuzz.sqlite")}` } },
  { name: "glidemq-valkey on Redis", backend: { type: "glidemq-valkey", url: redisUrl(15) } },
  { name: "qless-redis on Redis", backend: { type: "qless-redis", url: redisUrl(15) } },
  ...opened.map((store) => ({ name: `${store.spec.type} on ${store.name}`, backend: store.spec })),
];

const processes: GatewayProcess[] = [];
const redis = new Redis(redisUrl(15));
beforeAll(async () => {
  installSchemathesis();
  await redis.flushdb();
}, 300_000);
afterAll(async () => {
  for (const { child } of processes) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await redis.flushdb();
  redis.disconnect();
  await Promise.all(opened.map((store) => store.dispose()));
  rmSync(dir, { recursive: true, force: true });
});

type OpenApiDocument = { paths: Record<string, Record<string, { responses?: Record<string, { content?: object }> }>> };

/** The paths of operations that answer a Server-Sent Events stream: they stay open by design, so they are not fuzzed. */
function streamingPaths(document: OpenApiDocument) {
  return Object.entries(document.paths)
    .filter(([, operations]) => Object.values(operations).some((op) => "text/event-stream" in (op.responses?.["200"]?.content ?? {})))
    .map(([path]) => path);
}

/** The part of schemathesis's report worth reading when the run fails: the failures and the summary. */
const failures = (output: string) => output.slice(Math.max(0, output.indexOf("FAILURES") - 40)).slice(-20_000);

describe(`schemathesis ${SCHEMATHESIS_VERSION} on /openapi.json`, () => {
  for (const { name, backend } of STORES) {
    it(
      `finds no 5xx and no answer outside its schema, on ${name}`,
      async () => {
        // Cloudq's reserve answers at once (longPollMs 0) instead of waiting for a job.
        const gateway = await startGatewayProcess(dir, name.replaceAll(" ", "-"), {
          backends: { main: backend },
          doors: { cloudq: { longPollMs: 0 } },
        });
        processes.push(gateway);
        const document = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as OpenApiDocument;
        const operations = Object.values(document.paths).reduce((sum, ops) => sum + Object.keys(ops).length, 0);
        const streaming = streamingPaths(document);
        expect(streaming.length).toBeGreaterThan(0);

        const run = await runSchemathesis(`${gateway.url}/openapi.json`, [
          "--seed",
          SEED,
          "--max-examples",
          MAX_EXAMPLES,
          "--checks",
          "not_a_server_error,response_schema_conformance",
          ...streaming.flatMap((path) => ["--exclude-path", path]),
          // A request left hanging fails the run as a network error instead of stalling it.
          "--request-timeout",
          "10",
          "--no-shrink",
        ]);
        const report = `${failures(run.output)}\n--- gateway log ---\n${gateway.output().slice(-5_000)}`;
        expect(run.code, report).toBe(0);
        // Every operation but the streams was exercised, none skipped as untestable.
        expect(run.output, report).toContain(`Tested: ${operations - streaming.length}\n`);

        gateway.child.kill("SIGTERM");
        expect(await gateway.exited).toBe(0);
      },
      Number(MAX_EXAMPLES) * 48_000,
    );
  }
});
