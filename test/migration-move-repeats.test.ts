import { randomUUID } from "node:crypto";
import { type Backend, type Page, migrateQueue, queueChecksum, verifyQueue } from "@switchyard/core";
import type { Job } from "@switchyard/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "./matrix-backends.js";
import { exportAll } from "./migration-support.js";

/**
 * Moving from a source whose export returns a job on two pages, as glide-mq's SCAN-based export may:
 * the second page finds the job gone from the source (the first page moved it) and its copy already
 * in the target. That copy is the job, not a copy to take back as for a job a source worker took.
 * SQLite source (its export repeated by a wrapper), PostgreSQL target, both read directly too.
 */
describe("moving from a source that returns a job on two pages", () => {
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

  /**
   * The source with each export page starting with the last job of the page before, as read then,
   * and saying so (`mayRepeat`), as glide-mq's SCAN-based export does.
   */
  function repeatingLastJob(backend: Backend): Backend {
    let last: Job | null = null;
    const repeating = async (queue: string, options?: { limit?: number; cursor?: string }): Promise<Page<Job>> => {
      const page = await backend.export(queue, options);
      const items = last ? [last, ...page.items] : page.items;
      last = page.items.at(-1) ?? null;
      return { ...page, items, mayRepeat: true };
    };
    return new Proxy(backend, {
      get: (wrapped, property, receiver) => (property === "export" ? repeating : Reflect.get(wrapped, property, receiver)),
    });
  }

  it("every job ends in the target once and none in the source; nothing is reported kept or taken back", async () => {
    const queue = targetStore.track(sourceStore.track(`repeat-${randomUUID().slice(0, 8)}`));
    const ids: string[] = [];
    for (let n = 0; n < 7; n++) ids.push((await source.enqueue(queue, { name: "moved", data: { n } })).job.id);

    const report = await migrateQueue({ from: repeatingLastJob(source), to: target, queue, batchSize: 2, mode: "move" });

    expect(report).toMatchObject({ missing: [], keptInSource: [], doubled: [], altered: [], clashes: [] });
    // The repeated jobs were read twice and skipped the second time, as the same jobs.
    expect(report.skipped).toBeGreaterThan(0);
    expect(report.read).toBe(ids.length + report.skipped);
    expect((await exportAll(target, queue)).map((job) => job.id).sort()).toEqual([...ids].sort());
    expect(await targetStore.countJobs(queue)).toBe(ids.length);
    expect(await sourceStore.countJobs(queue)).toBe(0);
  });

  it("the verification counts a job handed out on two pages once: the same checksum as an export without repeats", async () => {
    const queue = targetStore.track(sourceStore.track(`repeat-${randomUUID().slice(0, 8)}`));
    for (let n = 0; n < 7; n++) await source.enqueue(queue, { name: "copied", data: { n } });
    await migrateQueue({ from: source, to: target, queue, batchSize: 2 });

    const repeating = repeatingLastJob(source);
    const checksum = await queueChecksum(repeating, queue);
    expect(checksum.waiting.jobs).toBe(7);
    expect(checksum).toEqual(await queueChecksum(source, queue));
    expect(await verifyQueue(repeating, target, { queue })).toMatchObject({ equal: true, differing: [] });
  });
});
