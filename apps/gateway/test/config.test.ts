import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { workerQueueAdapter } from "@switchyard/workerqueue-sql";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, compilePattern, createGateway, defaultConfig, loadConfig, parseConfig } from "../src/index.js";
import { send } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "switchyard-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe("config loading", () => {
  it("reads a YAML file and fills the defaults", async () => {
    const path = write(
      "ok.yaml",
      `backends:
  main: { type: workerqueue-sql, url: "sqlite:${join(dir, "main.sqlite")}" }
  yaml: { type: workerqueue-sql, url: "sqlite:${join(dir, "yaml.sqlite")}", options: { dataFormat: yaml } }
routes:
  - { pattern: "emails.*", backend: yaml }
  - { pattern: "*", backend: main }
doors:
  cloudq: { mountAtRoot: true }
`,
    );
    const config = await loadConfig(path);
    expect(config.backends.yaml).toEqual({
      type: "workerqueue-sql",
      url: `sqlite:${join(dir, "yaml.sqlite")}`,
      options: { dataFormat: "yaml" },
      timeoutMs: 5_000,
      storeEvents: true,
    });
    expect(config.routes).toHaveLength(2);
    expect(config.doors.cloudq).toEqual({ mountAtRoot: true, token: null, secret: null, leaseMs: 300_000, longPollMs: 0 });
  });

  it("reads a JSON file", async () => {
    const path = write("ok.json", JSON.stringify({ backends: { only: { type: "workerqueue-sql", url: "sqlite::memory:" } } }));
    const config = await loadConfig(path);
    expect(config.routes).toEqual([{ pattern: "*", backend: "only" }]);
  });

  it("without a file, one SQLite database ./switchyard.sqlite serves every queue", async () => {
    const config = await loadConfig();
    expect(config).toEqual(defaultConfig());
    expect(config.backends).toEqual({
      main: { type: "workerqueue-sql", url: "sqlite:./switchyard.sqlite", options: {}, timeoutMs: 5_000, storeEvents: true },
    });
    expect(config.auth).toEqual({ tokens: [] });
    expect(config.routes).toEqual([{ pattern: "*", backend: "main" }]);
  });

  it("names the file and the bad field when a value does not validate", async () => {
    const path = write("bad-type.yaml", "backends:\n  main: { type: rabbitmq, url: x }\n");
    await expect(loadConfig(path)).rejects.toThrow(ConfigError);
    await expect(loadConfig(path)).rejects.toThrow(/bad-type\.yaml[\s\S]*backends\.main\.type/);
  });

  it("names a route whose backend is not configured", () => {
    const config = { backends: { main: { type: "workerqueue-sql", url: "sqlite::memory:" } }, routes: [{ pattern: "*", backend: "pg" }] };
    expect(() => parseConfig(config)).toThrow(/routes\.0\.backend: unknown backend "pg" \(known: main\)/);
  });

  it("names misspelt keys, a missing url and a bad leaseMs", () => {
    expect(() => parseConfig({ backends: { main: { type: "workerqueue-sql" } } })).toThrow(/backends\.main\.url/);
    expect(() => parseConfig({ backends: { main: { type: "workerqueue-sql", url: "sqlite::memory:" } }, route: [] })).toThrow(/route/);
    expect(() =>
      parseConfig({ backends: { main: { type: "workerqueue-sql", url: "sqlite::memory:" } }, doors: { cloudq: { leaseMs: -1 } } }),
    ).toThrow(/doors\.cloudq\.leaseMs/);
    expect(() => parseConfig({ backends: {} })).toThrow(/backends: at least one backend/);
  });

  it("requires routes when there are several backends", () => {
    const config = {
      backends: { a: { type: "workerqueue-sql", url: "sqlite::memory:" }, b: { type: "workerqueue-sql", url: "sqlite::memory:" } },
    };
    expect(() => parseConfig(config)).toThrow(/routes: routes are required/);
  });

  it("reports a file that is not valid YAML or JSON, and one that does not exist", async () => {
    await expect(loadConfig(write("broken.json", "{ nope"))).rejects.toThrow(/broken\.json is not valid JSON/);
    await expect(loadConfig(write("broken.yaml", "backends: [a\n"))).rejects.toThrow(/broken\.yaml is not valid YAML/);
    await expect(loadConfig(join(dir, "missing.yaml"))).rejects.toThrow(/cannot read config file .*missing\.yaml/);
  });

  it("accepts every type in the adapter list but refuses one whose adapter is not in it, naming the known ones", async () => {
    const config = { backends: { q: { type: "qless-redis", url: "redis://127.0.0.1:1/7" } } };
    expect(parseConfig(config).backends.q!.type).toBe("qless-redis");
    await expect(createGateway({ config, adapters: [workerQueueAdapter] })).rejects.toThrow(
      /backends\.q\.type: unknown backend type "qless-redis" \(known: workerqueue-sql\)/,
    );
  });

  it("validates each backend's options with its adapter's schema and reports a bad one with its path", () => {
    const bad = {
      backends: {
        main: { type: "workerqueue-sql", url: "sqlite:./x.sqlite", options: { table: "drop table jobs" } },
        cache: { type: "glidemq-valkey", url: "redis://127.0.0.1:6379", options: { prefix: 7, unknownOption: true } },
        docs: { type: "cloudq-mongo", url: "http://not-mongo" },
      },
      routes: [{ pattern: "*", backend: "main" }],
    };
    let message = "";
    try {
      parseConfig(bad, "test config");
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/backends\.main\.options\.table: a SQL identifier/);
    expect(message).toMatch(/backends\.cache\.options\.prefix: /);
    expect(message).toMatch(/backends\.cache\.options: .*unknownOption/);
    expect(message).toMatch(/backends\.docs\.url: a mongodb:\/\/ or mongodb\+srv:\/\/ connection string/);
  });

  it("hands an adapter its options as its schema parsed them, defaults filled in", () => {
    const config = parseConfig({ backends: { docs: { type: "cloudq-mongo", url: "mongodb://127.0.0.1/cloudq" } } });
    expect(config.backends.docs!.options).toMatchObject({ collection: "cloudq.jobs", stateField: "queue_state", completion: "remove" });
  });
});

describe("routing", () => {
  it("compiles patterns where only * is special", () => {
    expect(compilePattern("emails.*").test("emails.welcome")).toBe(true);
    expect(compilePattern("emails.*").test("emailsXwelcome")).toBe(false);
    expect(compilePattern("a*b").test("a-anything-b")).toBe(true);
    expect(compilePattern("a*b").test("a-anything-c")).toBe(false);
    expect(compilePattern("exact").test("exact2")).toBe(false);
  });

  it("sends each queue to the first matching route's backend and answers 404 naming an unmatched queue", async () => {
    const config = {
      backends: {
        a: { type: "workerqueue-sql" as const, url: `sqlite:${join(dir, "route-a.sqlite")}` },
        b: { type: "workerqueue-sql" as const, url: `sqlite:${join(dir, "route-b.sqlite")}` },
      },
      routes: [
        { pattern: "emails.*", backend: "b" },
        { pattern: "work-*", backend: "a" },
      ],
    };
    const gateway = await createGateway({ config });
    try {
      await send(gateway, "POST", "/v1/queues/emails.welcome/jobs", { name: "Mail" });
      await send(gateway, "POST", "/v1/queues/work-1/jobs", { name: "Work" });
      expect(await gateway.backends.get("b")!.backend.queues()).toEqual(["emails.welcome"]);
      expect(await gateway.backends.get("a")!.backend.queues()).toEqual(["work-1"]);
      const listed = await send(gateway, "GET", "/v1/queues");
      expect(listed.json.queues).toEqual([
        { name: "emails.welcome", backend: "b" },
        { name: "work-1", backend: "a" },
      ]);
      const unmatched = await send(gateway, "POST", "/v1/queues/misc/jobs", { name: "X" });
      expect(unmatched.status).toBe(404);
      expect(unmatched.json.error.message).toBe('no route matches queue "misc"');
    } finally {
      await gateway.close();
    }
  });
});
