import { randomUUID } from "node:crypto";
import {
  type Backend,
  type Job,
  type Page,
  compareChecksums,
  migrateQueue,
  queueChecksum,
  verifyMigration,
  verifyQueue,
} from "@switchyard/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "./matrix-backends.js";
import { exportAll } from "./migration-support.js";

/**
 * The verification a migration makes as it goes (MigrationChecksums, verifyMigration) where a store
 * does not behave: a source whose export hands a job out twice, as glide-mq's SCAN-based one may, and
 * a target that stores a job otherwise than it was sent. SQLite source (wrapped), PostgreSQL target,
 * both read directly too.
 */
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

/** The backend with one method replaced. */
function overriding<K extends keyof Backend>(backend: Backend, method: K, replacement: Backend[K]): Backend {
  return new Proxy(backend, {
    get: (wrapped, property, receiver) => (property === method ? replacement : Reflect.get(wrapped, property, receiver)),
  });
}

/**
 * Within one run a repeated job is dropped as read (the run keeps the ids it met). After a resume it
 * is not known: moving, the resumed run finds the job gone from the source (moved before) and its copy
 * already in the target, and that copy is the job, not a copy to take back as for a job a source
 * worker took; copying, the checksums count it twice and say they are not exact.
 */
describe("migrating from a source that returns a job on two pages", () => {
  /** The source with every export page saying it may repeat a job (`mayRepeat`), its items as `items` makes them of the page read. */
  function repeatingExport(backend: Backend, items: (page: Page<Job>) => Job[]): Backend {
    return overriding(backend, "export", async (queue, options) => {
      const page = await backend.export(queue, options);
      return { ...page, items: items(page), mayRepeat: true };
    });
  }

  /** Each page starting with the last job of the page before, as read then, as glide-mq's SCAN-based export may. */
  function repeatingLastJob(backend: Backend): Backend {
    let last: Job | null = null;
    return repeatingExport(backend, (page) => {
      const items = last ? [last, ...page.items] : page.items;
      last = page.items.at(-1) ?? null;
      return items;
    });
  }

  /** The first page starting with `job`, as read before (by a run that was stopped). */
  function handingOutAgain(backend: Backend, job: Job): Backend {
    let first = true;
    return repeatingExport(backend, (page) => {
      const items = first ? [job, ...page.items] : page.items;
      first = false;
      return items;
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

describe("a migration's own checksums when the target changes a job", () => {
  /** The target, writing the job of this id with other data than it was given, as a lossy store would. */
  function altering(backend: Backend, id: string): Backend {
    const importJobs: Backend["import"] = (queue, jobs) =>
      backend.import(
        queue,
        jobs.map((job) => (job.id === id ? { ...job, data: { changed: true } } : job)),
      );
    return overriding(backend, "import", importJobs);
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
