import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestGateway, openTestGateway, until } from "./helpers.js";

/**
 * /v1/migrations: a migration or a bridge the gateway runs between two of its backends, its progress
 * readable through the API and /metrics, bad input refused before anything starts.
 */
let t: TestGateway;
let dir: string;
let targetFile: string;

/** Rows of a queue in the target's `jobs` table, read with SQLite itself. */
const targetRows = (queue: string) => {
  const db = new Database(targetFile, { readonly: true });
  try {
    return (db.prepare("select count(*) as n from jobs where sy_queue = ?").get(queue) as { n: number }).n;
  } finally {
    db.close();
  }
};

interface Run {
  id: string;
  state: string;
  copied: number;
  total: number | null;
  queues: Array<{ queue: string; copied: number; total: number | null; verified?: boolean; state: string }>;
}

const runOf = async (id: string) => (await t.request("GET", `/v1/migrations/${id}`)).json.run as Run;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-runs-"));
  targetFile = join(dir, "target.sqlite");
  t = await openTestGateway({
    backends: {
      main: { type: "workerqueue-sql", url: `sqlite:${join(dir, "source.sqlite")}` },
      archive: { type: "workerqueue-sql", url: `sqlite:${targetFile}` },
    },
    routes: [{ pattern: "*", backend: "main" }],
  });
});
afterAll(async () => {
  await t?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

describe("/v1/migrations", () => {
  it("copies every job of a queue to another backend, verified, its progress in the API and in /metrics", async () => {
    const queue = "runs-copy";
    for (let i = 0; i < 3; i++) {
      const jobs = Array.from({ length: 400 }, (_, n) => ({ name: "job", data: { n: i * 400 + n } }));
      expect((await t.request("POST", `/v1/queues/${queue}/jobs/bulk`, { jobs })).status).toBe(201);
    }
    const started = await t.request("POST", "/v1/migrations", { kind: "migrate", from: "main", to: "archive", queue });
    expect(started.status).toBe(202);
    const { id } = started.json.run as Run;
    await until(async () => (await runOf(id)).state !== "running", "the migration to finish");

    const run = await runOf(id);
    expect(run).toMatchObject({ state: "finished", copied: 1200, total: 1200 });
    expect(run.queues).toEqual([{ queue, state: "done", copied: 1200, total: 1200, verified: true }]);
    expect(targetRows(queue)).toBe(1200);
    const listed = (await t.request("GET", "/v1/migrations")).json.runs as Run[];
    expect(listed.map((entry) => entry.id)).toContain(id);

    const families = parsePrometheusTextFormat((await t.request("GET", "/metrics")).text) as Array<{
      name: string;
      metrics: Array<{ labels: Record<string, string>; value: string }>;
    }>;
    const series = (name: string) => families.find((family) => family.name === name)?.metrics.find((metric) => metric.labels.run === id);
    expect(series("switchyard_migration_jobs_copied")).toMatchObject({ labels: { queue, from: "main", to: "archive" }, value: "1200" });
    expect(series("switchyard_migration_jobs_total")?.value).toBe("1200");
    expect(series("switchyard_migration_running")?.value).toBe("0");
  });

  it("a bridge moves what arrives until it is stopped", async () => {
    const queue = "runs-bridge";
    const started = await t.request("POST", "/v1/migrations", { kind: "bridge", from: "main", to: "archive", queue, intervalMs: 20 });
    expect(started.status).toBe(202);
    const { id } = started.json.run as Run;
    for (let n = 0; n < 10; n++) await t.request("POST", `/v1/queues/${queue}/jobs`, { name: "arrival", data: { n } });
    await until(() => targetRows(queue) === 10, "the bridge to move the ten jobs");
    await until(async () => (await runOf(id)).copied === 10, "the run to count them");
    const counts = (await t.request("GET", `/v1/queues/${queue}/counts`)).json.counts as Record<string, number>;
    expect(Object.values(counts).reduce((sum, n) => sum + n, 0)).toBe(0);

    const stopped = await t.request("DELETE", `/v1/migrations/${id}`);
    expect(stopped.status).toBe(200);
    expect(stopped.json.run).toMatchObject({ state: "stopped", copied: 10 });
    await t.request("POST", `/v1/queues/${queue}/jobs`, { name: "after-stop" });
    expect((await t.request("GET", `/v1/queues/${queue}/counts`)).json.counts.waiting).toBe(1);
  });

  it("refuses bad input with a 400 naming it, and starts nothing", async () => {
    const before = ((await t.request("GET", "/v1/migrations")).json.runs as Run[]).length;
    const refused = [
      { kind: "migrate", from: "nowhere", to: "archive" },
      { kind: "migrate", from: "main", to: "main" },
      { kind: "migrate", from: "main", to: "archive", targetQueue: "x" },
      { kind: "teleport", from: "main", to: "archive" },
      { kind: "migrate", from: "main", to: "archive", batchSize: 0 },
      // Only a move leaves active jobs behind to wait for.
      { kind: "migrate", from: "main", to: "archive", waitActive: 5 },
      { kind: "migrate", from: "main", to: "archive", mode: "move", waitActive: -1 },
    ];
    for (const body of refused) {
      const res = await t.request("POST", "/v1/migrations", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.message.length).toBeGreaterThan(0);
    }
    expect((await t.request("POST", "/v1/migrations", "{not json")).status).toBe(400);
    expect(((await t.request("GET", "/v1/migrations")).json.runs as Run[]).length).toBe(before);
    expect((await t.request("GET", "/v1/migrations/not-a-uuid")).status).toBe(400);
    expect((await t.request("GET", "/v1/migrations/00000000-0000-4000-8000-000000000000")).status).toBe(404);
  });
});
