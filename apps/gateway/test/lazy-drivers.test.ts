import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * The adapter registry loads no database driver until a backend of its type is opened, so that a
 * command pays in memory only for the stores it uses (mongodb's driver alone is about 20 MB of a
 * `switchyard migrate` between two Redis stores). Checked in a fresh Node process, by the CommonJS
 * modules it has loaded (every driver here is one).
 */
const DRIVERS = ["mongodb", "ioredis", "knex", "pg", "mysql2", "better-sqlite3"];
const CLI = fileURLToPath(new URL("../src/cli.ts", import.meta.url));
const REGISTRY = fileURLToPath(new URL("../src/adapters.ts", import.meta.url));

/** The driver packages a fresh process has loaded after running `script` (an ES module body). */
function driversLoadedAfter(script: string): string[] {
  const program = `
    import { createRequire } from "node:module";
    await import(${JSON.stringify(CLI)});
    const { ADAPTERS } = await import(${JSON.stringify(REGISTRY)});
    ${script}
    const packages = Object.keys(createRequire(import.meta.url).cache).map((path) => path.match(/node_modules\\/([^/]+)\\//)?.[1]);
    process.stdout.write(JSON.stringify([...new Set(packages)].filter((name) => ${JSON.stringify(DRIVERS)}.includes(name)).sort()));
  `;
  const out = execFileSync(
    process.execPath,
    ["--import", "tsx", "--conditions=@switchyard/source", "--input-type=module", "--eval", program],
    {
      encoding: "utf8",
    },
  );
  return JSON.parse(out) as string[];
}

describe("drivers load on demand", () => {
  it("the command line and the adapter registry load no driver", () => {
    expect(driversLoadedAfter("")).toEqual([]);
  });

  it("opening a SQLite backend loads knex and better-sqlite3, and no other store's driver", () => {
    const opened = driversLoadedAfter(`
      const adapter = ADAPTERS.find((candidate) => candidate.type === "workerqueue-sql");
      const backend = await adapter.create(adapter.optionsSchema.parse({ url: "sqlite::memory:" }));
      await backend.ready();
      await backend.close();
    `);
    expect(opened).toEqual(["better-sqlite3", "knex"]);
  });
});
