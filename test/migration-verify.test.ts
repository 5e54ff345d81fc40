import { randomUUID } from "node:crypto";
import { type Backend, compareChecksums, migrateQueue, queueChecksum, verifyMigration } from "@switchyard/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "./matrix-backends.js";

/**
 * The verification a migration makes as it goes (MigrationChecksums) against a target that stores a
 * job otherwise than it was sent: the two checksums disagree, and verifyMigration then reads both
 * queues again to name the job. SQLite source, PostgreSQL target, the stored row read back directly.
 */
describe("a migration's own checksums when the target changes a job", () => {
  const sourceStore = openStore("sqlite");
  const targetStore = openStore("postgres");
  let source: Backend;
  let target: Backend;

  beforeAll(async () => {
    [source, target] = await Promise.all([sourceStore.openBackend(), targetStore.openBackend()]);
  });
  afterAll(async () => {
    await Promise.all([source.close(), target.close()]);
    await Promise.all([sourceStore.dispose(), targetStore.dispose()]);
  });

  /** The target, writing the job of this id with other data than it was given, as a lossy store would. */
  function altering(backend: Backend, id: string): Backend {
    const importJobs: Backend["import"] = (queue, jobs) =>
      backend.import(
        queue,
        jobs.map((job) => (job.id === id ? { ...job, data: { changed: true } } : job)),
      );
    return new Proxy(backend, {
      get: (wrapped, property, receiver) => (property === "import" ? importJobs : Reflect.get(wrapped, property, receiver)),
    });
  }

  it("the checksums differ, the job is reported altered, and the verification reads again and names it", async () => {
    const queue = targetStore.track(sourceStore.track(`verify-${randomUUID().slice(0, 8)}`));
    const ids: string[] = [];
    for (let n = 0; n < 5; n++) ids.push((await source.enqueue(queue, { name: "sent", data: { n } })).job.id);
    const changed = ids[2] as string;

    const report = await migrateQueue({ from: source, to: altering(target, changed), queue, batchSize: 2 });

    expect(report.altered).toEqual([changed]);
    expect(report.checksums.exact).toBe(true);
    expect(report.checksums.source).toEqual(await queueChecksum(source, queue));
    expect(report.checksums.target).toEqual(await queueChecksum(target, queue));
    expect(compareChecksums(report.checksums.source, report.checksums.target).equal).toBe(false);
    expect((await target.get(queue, changed))?.data).toEqual({ changed: true });

    const verification = await verifyMigration(source, target, report, { queue });
    expect(verification).toMatchObject({ equal: false, readAgain: true, differing: [changed] });
    expect(verification.states.waiting).toMatchObject({ source: { jobs: 5 }, target: { jobs: 5 } });
  });
});
