import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@switchyard/conformance";
import type { Backend } from "@switchyard/core";
import { createGlideMqBackend } from "@switchyard/glidemq-valkey";
import { createWorkerQueueBackend } from "@switchyard/workerqueue-sql";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI_FROM_SOURCE } from "../apps/gateway/test/helpers.js";
import { serviceUrl } from "./support/services.js";

/**
 * The live cutover: producers keep writing to the old store (SQLite) while `switchyard bridge` moves
 * what arrives to the new one (glide-mq), where the workers already are; then the producers switch
 * too, the bridge is stopped with SIGTERM, and every job produced was processed exactly once.
 */
const dir = mkdtempSync(join(tmpdir(), "switchyard-cutover-"));
const sourceUrl = `sqlite:${join(dir, "old.sqlite")}`;
const redisUrl = `${serviceUrl("redis").replace(/\/\d*$/, "")}/5`;
const QUEUE = "orders";
const PRODUCED_BEFORE_SWITCH = 3_000;
const PRODUCED_AFTER_SWITCH = 500;

let source: Backend;
let target: Backend;

beforeAll(async () => {
  source = createWorkerQueueBackend({ url: sourceUrl });
  target = createGlideMqBackend({ url: redisUrl });
  await Promise.all([source.ready(), target.ready()]);
});

afterAll(async () => {
  await Promise.all([source?.close(), target?.close()]);
  const redis = new Redis(redisUrl);
  await redis.flushdb();
  redis.disconnect();
  rmSync(dir, { recursive: true, force: true });
});

describe("switchyard bridge", () => {
  it("moves what producers keep adding to the old store while workers consume the new one; each job runs once", async () => {
    const bridge: ChildProcess = spawn(
      process.execPath,
      [
        ...CLI_FROM_SOURCE,
        "bridge",
        "--from",
        sourceUrl,
        "--to",
        `${redisUrl}?type=glidemq`,
        "--queue",
        QUEUE,
        "--interval",
        "50",
        "--batch-size",
        "200",
        "--id-prefix",
        "old-",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    let err = "";
    bridge.stdout?.on("data", (chunk) => {
      out += chunk;
    });
    bridge.stderr?.on("data", (chunk) => {
      err += chunk;
    });
    const exited = new Promise<number | null>((resolve) => bridge.on("exit", resolve));

    const processed = new Map<string, number>();
    let producing = true;
    const workers = Array.from({ length: 4 }, async (_, w) => {
      for (;;) {
        const jobs = await target.reserve(QUEUE, { worker: `new-${w}`, count: 20 });
        for (const job of jobs) {
          const n = (job.data as { n: number }).n;
          processed.set(String(n), (processed.get(String(n)) ?? 0) + 1);
          await target.complete(QUEUE, job.id, { worker: `new-${w}` });
        }
        if (jobs.length === 0) {
          if (!producing && processed.size === PRODUCED_BEFORE_SWITCH + PRODUCED_AFTER_SWITCH) return;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }
    });

    // Producers on the old store at a steady rate, then on the new one.
    for (let n = 0; n < PRODUCED_BEFORE_SWITCH; n += 50) {
      await source.enqueueBulk(
        QUEUE,
        Array.from({ length: 50 }, (_, i) => ({ name: "order", data: { n: n + i } })),
      );
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    for (let n = PRODUCED_BEFORE_SWITCH; n < PRODUCED_BEFORE_SWITCH + PRODUCED_AFTER_SWITCH; n += 50) {
      await target.enqueueBulk(
        QUEUE,
        Array.from({ length: 50 }, (_, i) => ({ name: "order", data: { n: n + i } })),
      );
    }
    producing = false;
    await eventually(
      async () => (await source.counts(QUEUE)).waiting === 0,
      `the bridge to empty the old queue (${err.slice(-300)})`,
      60_000,
    );
    bridge.kill("SIGTERM");
    expect(await exited).toBe(0);
    await Promise.all(workers);

    expect(processed.size).toBe(PRODUCED_BEFORE_SWITCH + PRODUCED_AFTER_SWITCH);
    expect([...processed.values()].every((count) => count === 1)).toBe(true);
    expect(await source.counts(QUEUE)).toMatchObject({ waiting: 0, delayed: 0, active: 0 });
    const totals = JSON.parse(out);
    expect(totals).toMatchObject({ moved: PRODUCED_BEFORE_SWITCH, doubled: [], altered: [], missing: [], clashes: [] });
    // The moved jobs carry the prefix; the target's own ids, given out meanwhile, did not collide with them.
    expect((await target.get(QUEUE, "old-1"))?.data).toEqual({ n: 0 });
    expect(totals.passes).toBeGreaterThan(1);
    // Progress lines as migrate writes them, for a script to follow.
    expect(err).toMatch(/\{"queue":"orders","read":\d+/);
  }, 180_000);
});
