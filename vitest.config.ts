import { readdirSync } from "node:fs";
import { defaultServerConditions } from "vite";
import { defineConfig } from "vitest/config";

// One test project per folder under packages/, so a new adapter is picked up by itself.
const packages = readdirSync(new URL("./packages", import.meta.url));

// Workspace packages export their TypeScript sources under this condition, so tests run without a build.
const sourceConditions = ["@switchyard/source", ...defaultServerConditions];

export default defineConfig({
  resolve: { conditions: sourceConditions },
  ssr: { resolve: { conditions: sourceConditions } },
  test: {
    // Suites talk to real servers; a slow CI machine gets room, but nothing waits on a timer.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // One project per package (`npx vitest run --project qless-redis`), plus the cross-package suites.
    projects: [
      ...packages.map((name) => ({ extends: true as const, test: { name, include: [`packages/${name}/test/**/*.test.ts`] } })),
      { extends: true, test: { name: "gateway", include: ["apps/gateway/test/**/*.test.ts"] } },
      { extends: true, test: { name: "cross", include: ["test/**/*.test.ts"] } },
    ],
  },
});
