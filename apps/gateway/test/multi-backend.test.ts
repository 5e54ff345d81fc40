import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import knexFactory from "knex";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { type Gateway, createGateway, loadConfig } from "../src/index.js";
import { send } from "./helpers.js";

/** A YAML config routing `emails.*` to PostgreSQL (YAML-encoded data, own table) and the rest to SQLite. */
describe("a YAML config with two backends routes each queue to its own store", () => {
  const dir = mkdtempSync(join(tmpdir(), "switchyard-multi-"));
  const table = `gw_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const pg = knexFactory({ client: "pg", connection: serviceUrl("postgres") });
  let gateway: Gateway;

  beforeAll(async () => {
    const file = join(dir, "switchyard.yaml");
    writeFileSync(
      file,
      `backends:
  main: { type: workerqueue-sql, url: "sqlite:${join(dir, "main.sqlite")}" }
  pg:   { type: workerqueue-sql, url: "${serviceUrl("postgres")}", options: { dataFormat: yaml, table: ${table} } }
routes:
  - { pattern: "emails.*", backend: pg }
  - { pattern: "*", backend: main }
`,
    );
    gateway = await createGateway({ config: await loadConfig(file), env: {} });
  });

  afterAll(async () => {
    await gateway?.close();
    await pg.schema.dropTableIfExists(table);
    await pg.schema.dropTableIfExists(`${table}_paused_queues`);
    await pg.schema.dropTableIfExists(`${table}_sy_recurring`);
    await pg.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a Cloudq publish to emails.welcome lands in the PostgreSQL table with YAML data, options passed to the adapter", async () => {
    const res = await send(gateway, "POST", "/cloudq/emails.welcome", { job: { klass: "Welcome", args: ["a@b.c"] } });
    expect(res.json).toEqual({ status: "success" });
    const rows = await pg(table).select("name", "status", "data");
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ name: "Welcome", status: "pending" });
    expect(String(rows[0].data)).toMatch(/^---/);
    expect(await gateway.backends.get("main")!.backend.queues()).not.toContain("emails.welcome");
  });

  it("other queues stay in SQLite, and /v1/queues names each queue's backend", async () => {
    await send(gateway, "POST", "/v1/queues/reports/jobs", { name: "Report" });
    expect(await pg(table).where({ name: "Report" }).count({ n: "*" })).toEqual([{ n: "0" }]);
    const listed = await send(gateway, "GET", "/v1/queues");
    expect(listed.json.queues).toEqual([
      { name: "emails.welcome", backend: "pg" },
      { name: "reports", backend: "main" },
    ]);
    const health = await send(gateway, "GET", "/health");
    expect(health.json).toMatchObject({
      status: "ok",
      backends: { main: { ok: true }, pg: { ok: true, kind: expect.stringContaining("postgres") } },
    });
  });
});
