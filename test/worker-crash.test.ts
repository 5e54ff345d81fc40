import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { eventually } from "@switchyard/conformance";
import type { Backend, Job } from "@switchyard/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreName, type StoreUnderTest, openStore } from "./matrix-backends.js";

/**
 * A worker process killed with SIGKILL while it holds a lease, on every backend type: the job comes
 * back once the lease runs out, another worker completes it once, and both runs are counted.
 */
const STORES: Array<{ name: StoreName; redisDb?: number }> = [
  { name: "sqlite" },
  { name: "postgres" },
  { name: "mysql" },
  { name: "qless", redisDb: 2 },
  { name: "glidemq", redisDb: 2 },
  { name: "cloudq" },
];
const LEASE_MS = 1_500;
const HOLDER = fileURLToPath(new URL("./support/hold-lease.ts", import.meta.url));

/** Runs the worker process until it holds the job, then kills it with SIGKILL; answers the id it held. */
async function holdAndKill(spec: StoreUnderTest["spec"], queue: string): Promise<string> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "--conditions=@switchyard/source", HOLDER, JSON.stringify(spec), queue, String(LEASE_MS)],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr.on("data", (chunk) => {
    err += chunk;
  });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const held = await eventually(async () => /held (\S+)/.exec(out)?.[1], `the worker to hold a job (${out}${err})`, 30_000);
  child.kill("SIGKILL");
  await exited;
  return held;
}

for (const { name, redisDb } of STORES) {
  describe(`a worker killed with SIGKILL while holding a lease, on ${name}`, () => {
    let store: StoreUnderTest;
    let backend: Backend;
    beforeAll(async () => {
      store = openStore(name, redisDb);
      backend = await store.openBackend();
    });
    afterAll(async () => {
      await backend?.close();
      await store?.dispose();
    });

    it("the job is handed out again after the lease, completed once, both runs counted", async () => {
      const queue = store.track(`crash-${randomUUID().slice(0, 8)}`);
      const { job } = await backend.enqueue(queue, { name: "fragile", maxAttempts: 3 });
      const held = await holdAndKill(store.spec, queue);
      expect(held).toBe(job.id);
      expect((await backend.get(queue, job.id))?.state).toBe("active");
      // Nobody gets it while the dead worker's lease holds.
      expect(await backend.reserve(queue, { worker: "survivor" })).toEqual([]);
      const [again] = await eventually(
        async () => {
          const jobs = await backend.reserve(queue, { worker: "survivor" });
          return jobs.length > 0 ? jobs : undefined;
        },
        "the lease to run out",
        30_000,
      );
      expect(again).toMatchObject({ id: job.id, attempts: 2 });
      const done = await backend.complete(queue, job.id, { worker: "survivor" });
      expect(done.state === "completed" || !backend.capabilities.keepsCompleted).toBe(true);
      await expect(backend.complete(queue, job.id, { worker: "doomed" })).rejects.toBeDefined();
      const after = (await backend.get(queue, job.id)) as Job | null;
      if (backend.capabilities.keepsCompleted) expect(after).toMatchObject({ state: "completed", attempts: 2 });
      expect(await backend.reserve(queue, { worker: "survivor" })).toEqual([]);
    }, 60_000);
  });
}
