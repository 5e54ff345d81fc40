import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "apps/*/test/**/*.test.ts", "test/**/*.test.ts"],
    // Suites talk to real servers; a slow CI machine gets room, but nothing waits on a timer.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
