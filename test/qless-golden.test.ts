import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { captureMessages, loadScenarios, replayScenario } from "../packages/qless-redis/test/helpers/golden.js";
import { type PrivateRedis, startPrivateRedis } from "../packages/qless-redis/test/helpers/private-redis.js";

/**
 * Replays every trace recorded from the real qless-core script (../shared/golden/qless) against
 * Switchyard's qless script and compares replies, pub/sub messages and a dump of every key after
 * each step. It runs on a private redis-server: pub/sub is server-wide, and other test files
 * publish on ql:* channels of the shared server.
 *
 * KNOWN_FAILING lists scenarios that do not match yet; each is asserted to still differ, so the
 * list cannot rot silently once they are fixed.
 */
const KNOWN_FAILING = new Set<string>([]);

let server: PrivateRedis;
let redis: Redis;
let capture: Awaited<ReturnType<typeof captureMessages>>;

beforeAll(async () => {
  server = await startPrivateRedis();
  redis = server.connect();
  capture = await captureMessages(server.connect(), redis);
});

afterAll(async () => {
  await server?.stop();
});

describe("qless golden traces: Switchyard's script answers, publishes and stores exactly what qless-core does", () => {
  for (const scenario of loadScenarios()) {
    if (KNOWN_FAILING.has(scenario.file)) {
      it(`${scenario.file} is a known difference and still differs (remove it from KNOWN_FAILING once fixed)`, async () => {
        const problems = await replayScenario(redis, capture, scenario);
        expect(problems.length).toBeGreaterThan(0);
      });
    } else {
      it(`${scenario.file}: ${scenario.scenario} matches step by step`, async () => {
        const problems = await replayScenario(redis, capture, scenario);
        expect(problems).toEqual([]);
      });
    }
  }
});
