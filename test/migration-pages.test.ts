import { randomUUID } from "node:crypto";
import { type Backend, type Job, migrateQueue } from "@switchyard/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StoreUnderTest, openStore } from "./matrix-backends.js";
import { jobRecord } from "./support/job-record.js";

/**
 * migrateQueue writes two pages into the target at once where their jobs cannot meet there, and one
 * after the other where they can: a blocked job and the job it waits for on two pages are each
 * marked by the import that sees the other written. Here every dependency crosses from one page to
 * the next, both ways round (children exported before their parents too); written at once, each
 * page's import missed the other's jobs, and 600 of the 600 children were never released (MariaDB,
 * whose imports take long enough for the two to overlap every time).
 */
describe("migration: dependencies across pages written two at a time (SQLite -> MariaDB)", () => {
  const fromStore: StoreUnderTest = openStore("sqlite");
  const toStore: StoreUnderTest = openStore("mysql");
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

  it("each parent's completion in the target releases its child, whichever of their pages came first", async () => {
    const queue = toStore.track(fromStore.track(`pages-${randomUUID().slice(0, 8)}`));
    const now = Date.now();
    const job = (id: string, state: Job["state"], dependsOn: string[] = []): Job =>
      jobRecord({ id, queue, name: "chain", createdAt: now, state, dependsOn });
    // Pages of PAGE jobs: parents, then their children, then plain jobs, then children exported before
    // their parents (blocked on the page after), then those parents.
    const PAGE = 300;
    const ids = (prefix: string) => Array.from({ length: PAGE }, (_, i) => `${prefix}-${i}`);
    const seeded = [
      ...ids("parent").map((id) => job(id, "waiting")),
      ...ids("child").map((id, i) => job(id, "blocked", [`parent-${i}`])),
      ...ids("plain").map((id) => job(id, "waiting")),
      ...ids("early").map((id, i) => job(id, "blocked", [`late-${i}`])),
      ...ids("late").map((id) => job(id, "waiting")),
    ];
    for (let i = 0; i < seeded.length; i += PAGE) await from.import(queue, seeded.slice(i, i + PAGE));

    const report = await migrateQueue({ from, to, queue, batchSize: PAGE });
    expect(report.imported).toBe(seeded.length);
    expect(report.missing).toEqual([]);

    expect(await to.counts(queue)).toMatchObject({ waiting: 3 * PAGE, blocked: 2 * PAGE });
    // Draining the target completes every job: each completion releases the job waiting for it.
    let completed = 0;
    for (let round = 0; round < seeded.length * 2; round++) {
      const [reserved] = await to.reserve(queue, { worker: "w" });
      if (!reserved) break;
      await to.complete(queue, reserved.id, { worker: "w" });
      completed++;
    }
    const counts = await to.counts(queue);
    expect({ completed, blocked: counts.blocked }).toEqual({ completed: seeded.length, blocked: 0 });
  });
});
