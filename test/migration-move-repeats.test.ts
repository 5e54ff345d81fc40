import { randomUUID } from "node:crypto";
import { type Backend, type Page, migrateQueue, queueChecksum, verifyMigration, verifyQueue } from "@switchyard/core";
import type { Job } from "@switchyard/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "./matrix-backends.js";
import { exportAll } from "./migration-support.js";

/**
 * A source whose export returns a job on two pages, as glide-mq's SCAN-based export may. Within one
 * run the repeat is dropped as read (the run keeps the ids it met). After a resume it is not known:
 * moving, the resumed run finds the job gone from the source (moved before) and its copy already in
 * the target, and that copy is the job, not a copy to take back as for a job a source worker took.
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

  /** The source with its first export page starting with `job`, as read before, and every page saying it may repeat. */
  function handingOutAgain(backend: Backend, job: Job): Backend {
    let first = true;
    const repeating = async (queue: string, options?: { limit?: number; cursor?: string }): Promise<Page<Job>> => {
      const page = await backend.export(queue, options);
      const items = first ? [job, ...page.items] : page.items;
      first = false;
      return { ...page, items, mayRepeat: true };
    };
    return new Proxy(backend, {
      get: (wrapped, property, receiver) => (property === "export" ? repeating : Reflect.get(wrapped, property, receiver)),
    });
  }

  /** A new queue of seven waiting jobs in the source; their ids. */
  async function sevenJobs(): Promise<{ queue: string; ids: string[] }> {
    const queue = targetStore.track(sourceStore.track(`repeat-${randomUUID().slice(0, 8)}`));
    const ids: string[] = [];
    for (let n = 0; n < 7; n++) ids.push((await source.enqueue(queue, { name: "moved", data: { n } })).job.id);
    return { queue, ids };
  }

  /**
   * A migration of pages of two stopped after its first page is reported, then resumed from its
   * report by a source that hands the queue's first job out again (as read before the first run).
   */
  async function stoppedAndResumed(queue: string, mode: "copy" | "move") {
    const [firstJob] = (await source.export(queue, { limit: 1 })).items;
    const stop = new AbortController();
    const stopped = await migrateQueue({
      from: source,
      to: target,
      queue,
      batchSize: 2,
      mode,
      signal: stop.signal,
      onProgress: () => stop.abort(),
    });
    expect(stopped.cursor).not.toBeNull();
    const from = handingOutAgain(source, firstJob as Job);
    const resumed = await migrateQueue({
      from,
      to: target,
      queue,
      batchSize: 2,
      mode,
      cursor: stopped.cursor as string,
      checksums: stopped.checksums,
    });
    return { from, resumed };
  }

  it("within one run a repeated job is moved once: read once, nothing skipped, the checksums exact and equal", async () => {
    const { queue, ids } = await sevenJobs();
    const before = await queueChecksum(source, queue);

    const report = await migrateQueue({ from: repeatingLastJob(source), to: target, queue, batchSize: 2, mode: "move" });

    expect(report).toMatchObject({ read: ids.length, skipped: 0, removed: ids.length, missing: [], keptInSource: [], doubled: [] });
    expect(report.checksums).toEqual({ source: before, target: before, exact: true });
    expect(await targetStore.countJobs(queue)).toBe(ids.length);
    expect(await sourceStore.countJobs(queue)).toBe(0);
  });

  it("a job handed out again after a resume, moved before, stays moved: not taken back, not doubled", async () => {
    const { queue, ids } = await sevenJobs();
    const { resumed } = await stoppedAndResumed(queue, "move");

    expect(resumed).toMatchObject({ missing: [], keptInSource: [], doubled: [], altered: [], clashes: [], skipped: 1 });
    expect((await exportAll(target, queue)).map((job) => job.id).sort()).toEqual([...ids].sort());
    expect(await targetStore.countJobs(queue)).toBe(ids.length);
    expect(await sourceStore.countJobs(queue)).toBe(0);
    // The job read twice is summed twice on both sides: equal, but not the queue's counts.
    expect(resumed.checksums.exact).toBe(false);
    expect(resumed.checksums.source.waiting.jobs).toBe(ids.length + 1);
    expect(resumed.checksums.target).toEqual(resumed.checksums.source);
  });

  it("the verification counts a job handed out on two pages once: the same checksum as an export without repeats", async () => {
    const { queue } = await sevenJobs();
    await migrateQueue({ from: source, to: target, queue, batchSize: 2 });

    const repeating = repeatingLastJob(source);
    const checksum = await queueChecksum(repeating, queue);
    expect(checksum.waiting.jobs).toBe(7);
    expect(checksum).toEqual(await queueChecksum(source, queue));
    expect(await verifyQueue(repeating, target, { queue })).toMatchObject({ equal: true, differing: [] });
  });

  it("after a resume that may have counted a job twice, the verification reads both queues again and counts it once", async () => {
    const { queue } = await sevenJobs();
    const { from, resumed } = await stoppedAndResumed(queue, "copy");
    expect(resumed.checksums).toMatchObject({ exact: false, source: { waiting: { jobs: 8 } } });

    const verification = await verifyMigration(from, target, resumed, { queue });
    expect(verification).toMatchObject({ equal: true, readAgain: true, differing: [] });
    expect(verification.states.waiting).toMatchObject({ source: { jobs: 7 }, target: { jobs: 7 } });
  });
});
