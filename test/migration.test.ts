import { randomUUID } from "node:crypto";
import { type Backend, type MigrationProgress, migrateQueue, queueChecksum, verifyMigration, verifyQueue } from "@switchyard/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreName, type StoreUnderTest, openStore } from "./matrix-backends.js";
import { expectSameJobs, seedEveryState } from "./migration-support.js";

/**
 * migrateQueue between every pair of backend types (4 x 4), verified through the target adapter and
 * by probing the target's native store. A same-type pair crosses two servers or databases: SQLite
 * into PostgreSQL, Redis database 9 into 10 (qless jids are global to a database), two Mongo
 * databases. Sources read from Redis database 9, targets write to 10. A Cloudq target keeps
 * completed jobs (`mark-deleted`); the default `remove` layout is in migration-capabilities.test.ts.
 * What a target cannot hold is left out of the seed by capability (see seedEveryState), and the
 * refusals themselves are tested there too.
 */
const PAIRS: Array<[StoreName, StoreName]> = [
  // Worker Queue (SQL) into each type
  ["sqlite", "postgres"],
  ["sqlite", "qless"],
  ["postgres", "glidemq-cluster"],
  ["sqlite", "cloudq"],
  // qless into each type
  ["qless", "postgres"],
  ["qless", "qless"],
  ["qless", "glidemq"],
  ["qless", "cloudq"],
  // glide-mq into each type
  ["glidemq", "mysql"],
  ["glidemq", "qless"],
  ["glidemq", "glidemq"],
  ["glidemq", "cloudq"],
  // a cluster's export reads each page on the node that holds the queue
  ["glidemq-cluster", "sqlite"],
  // Cloudq into each type
  ["cloudq", "sqlite"],
  ["cloudq", "qless"],
  ["cloudq", "glidemq"],
  ["cloudq", "cloudq"],
];
const REDIS_DB = { source: 9, target: 10 };

for (const [fromName, toName] of PAIRS) {
  describe(`migration ${fromName} -> ${toName}`, () => {
    const fromStore: StoreUnderTest = openStore(fromName, REDIS_DB.source);
    const toStore: StoreUnderTest = openStore(toName, REDIS_DB.target, { completion: "mark-deleted" });
    let from: Backend;
    let to: Backend;

    beforeAll(async () => {
      from = await fromStore.openBackend();
      to = await toStore.openBackend();
    });
    afterAll(async () => {
      await Promise.all([from?.close(), to?.close()]);
      await Promise.all([fromStore.dispose(), toStore.dispose()]);
    });

    const newQueue = () => toStore.track(fromStore.track(`mig-${randomUUID().slice(0, 8)}`));

    it("every job arrives with its id, name, data, attempts, priority, createdAt and state (active arrives waiting)", async () => {
      const queue = newQueue();
      const source = await seedEveryState(from, queue, to);
      expect(new Set(source.map((job) => job.state))).toEqual(
        new Set([
          "active",
          "failed",
          "waiting",
          "delayed",
          ...(from.capabilities.keepsCompleted ? ["completed"] : []),
          ...(from.capabilities.dependencies && to.capabilities.dependencies ? ["blocked"] : []),
        ]),
      );
      const pages: MigrationProgress[] = [];
      const report = await migrateQueue({ from, to, queue, batchSize: 2, onProgress: (p) => pages.push(p) });
      expect(report).toMatchObject({ read: source.length, imported: source.length, skipped: 0, cursor: null, missing: [] });
      // One report per page: at most batchSize more jobs each, a cursor to resume from until the last.
      pages.forEach((page, index) => {
        expect(page.read - (pages[index - 1]?.read ?? 0)).toBeLessThanOrEqual(2);
        expect(page.cursor === null).toBe(index === pages.length - 1);
      });
      await expectSameJobs(source, to, toStore, queue);
      // A copy, never a move: the source still holds every record.
      expect(await fromStore.countJobs(queue)).toBe(source.length);
    });

    it("into a differently named target queue, the jobs keep their ids and land only there", async () => {
      const queue = newQueue();
      const targetQueue = newQueue();
      const source = await seedEveryState(from, queue, to);
      const report = await migrateQueue({ from, to, queue, targetQueue });
      expect(report.missing).toEqual([]);
      await expectSameJobs(source, to, toStore, targetQueue);
      expect(await toStore.countJobs(queue)).toBe(0);
    });

    it("a migration interrupted after its first page and resumed from the reported cursor ends with every job exactly once", async () => {
      const queue = newQueue();
      const source = await seedEveryState(from, queue, to);
      let reported: MigrationProgress | undefined;
      const interrupted = migrateQueue({
        from,
        to,
        queue,
        batchSize: 2,
        onProgress: (progress) => {
          reported = progress;
          throw new Error("connection lost");
        },
      });
      await expect(interrupted).rejects.toThrow("connection lost");
      expect(reported).toMatchObject({ read: 2, imported: 2 });
      // The first page, and the second if it was already on its way (the target writes a page while
      // the one before is checked): the resumed run finds those two and skips them as the same jobs.
      const landed = await toStore.countJobs(queue);
      expect([2, 4]).toContain(landed);

      const resumed = await migrateQueue({ from, to, queue, batchSize: 2, cursor: reported!.cursor!, checksums: reported!.checksums });
      expect(resumed).toMatchObject({ read: source.length - 2, skipped: landed - 2, missing: [], clashes: [] });
      expect(resumed.imported).toBe(source.length - landed);
      await expectSameJobs(source, to, toStore, queue);
      // The checksums went on from the reported ones: the whole queue's, each job once, as a full read
      // gives them. A resumed SCAN-based export (glide-mq) cannot tell a job read before from a new one.
      expect(resumed.checksums.exact).toBe(!fromName.startsWith("glidemq"));
      if (resumed.checksums.exact) {
        expect(resumed.checksums.source).toEqual(await queueChecksum(from, queue));
        expect(resumed.checksums.target).toEqual(await queueChecksum(to, queue));
      }
    });

    it("every page arrives unaltered (same digest), and the whole queue has the same checksum per state on both sides", async () => {
      const queue = newQueue();
      await seedEveryState(from, queue, to);
      const report = await migrateQueue({ from, to, queue, batchSize: 3 });
      expect(report.altered).toEqual([]);
      const verification = await verifyQueue(from, to, { queue });
      expect(verification).toMatchObject({ equal: true, differing: [], readAgain: true });
      for (const { source, target } of Object.values(verification.states)) expect(target).toEqual(source);
      expect(Object.values(verification.states).reduce((sum, pair) => sum + pair.source.jobs, 0)).toBe(report.read);
      // The migration's own checksums, summed from the pages read and from what the target's imports
      // answered, are those of the two queues read whole: its verification needs no second read.
      expect(report.checksums).toEqual({ source: await queueChecksum(from, queue), target: await queueChecksum(to, queue), exact: true });
      expect(await verifyMigration(from, to, report, { queue })).toEqual({ ...verification, readAgain: false });
    });

    it("moving deletes each job from the source once the target holds it, and leaves the active one to its worker", async () => {
      const queue = newQueue();
      const source = await seedEveryState(from, queue, to);
      const active = source.filter((job) => job.state === "active").map((job) => job.id);
      const report = await migrateQueue({ from, to, queue, batchSize: 2, mode: "move" });
      expect(report).toMatchObject({
        leftActive: active.length,
        removed: source.length - active.length,
        missing: [],
        altered: [],
        doubled: [],
      });
      expect(await fromStore.countJobs(queue)).toBe(active.length);
      for (const id of active) expect((await from.get(queue, id))?.state).toBe("active");
      await expectSameJobs(
        source.filter((job) => job.state !== "active"),
        to,
        toStore,
        queue,
      );
      // Moving again finds only the active job, still held by its worker.
      expect(await migrateQueue({ from, to, queue, mode: "move" })).toMatchObject({
        read: active.length,
        removed: 0,
        leftActive: active.length,
      });
    });

    it("migrating a queue again imports nothing: every job is skipped and the target is unchanged", async () => {
      const queue = newQueue();
      const source = await seedEveryState(from, queue, to);
      await migrateQueue({ from, to, queue });
      const again = await migrateQueue({ from, to, queue, batchSize: 4 });
      expect(again).toMatchObject({ read: source.length, imported: 0, skipped: source.length, missing: [] });
      await expectSameJobs(source, to, toStore, queue);
    });
  });
}
