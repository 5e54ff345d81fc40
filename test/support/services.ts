import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** The servers `npm test` (scripts/services.mjs) starts, by the variable that carries each address. */
const VARIABLES = {
  redis: "SWITCHYARD_REDIS_URL",
  "redis-cluster": "SWITCHYARD_REDIS_CLUSTER_NODES",
  postgres: "SWITCHYARD_POSTGRES_URL",
  mysql: "SWITCHYARD_MYSQL_URL",
  mongo: "SWITCHYARD_MONGO_URL",
} as const;
export type ServiceName = keyof typeof VARIABLES;

/**
 * The address of a running test server. A suite never skips for want of one: it fails and says how
 * to get it. Reads the environment first, then `.services/env.json` left by `npm run services`.
 */
export function serviceUrl(name: ServiceName): string {
  const variable = VARIABLES[name];
  const value = process.env[variable] ?? fromServicesFile(variable);
  if (value) return value;
  throw new Error(
    `${variable} is not set, so there is no ${name} server to test against. Run the tests with \`npm test\`, ` +
      "which installs and starts every server, or start them once with `npm run services -- start` " +
      "(see scripts/services.mjs) and run vitest directly.",
  );
}

function fromServicesFile(variable: string): string | undefined {
  let dir = process.cwd();
  for (;;) {
    const file = join(dir, ".services", "env.json");
    if (existsSync(file)) return (JSON.parse(readFileSync(file, "utf8")) as Record<string, string>)[variable];
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}
