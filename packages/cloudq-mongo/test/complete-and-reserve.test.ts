import { type Backend, type Job, completeAndReserve } from "@switchyard/core";
import { type CommandStartedEvent, type CommandSucceededEvent, MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CloudqBackendOptions, type CompletionMode, createCloudqBackend } from "../src/index.js";
import { mongoUrl, rawClient, rawFilter, testDatabase } from "./helpers.js";

/**
 * completeAndReserve() on the Cloudq layout: what it costs the store (commands counted at the
 * driver, which is what the issue-14 target counts), and that it keeps every guarantee of
 * complete() followed by reserve() while several backends race.
 */
const database = testDatabase("chain");
const MODES: CompletionMode[] = ["remove", "mark-deleted"];
let raw: MongoClient;
const jobs = () => raw.db(database).collection("cloudq.jobs");
const queue = () => `chain-${Math.random().toString(36).slice(2, 10)}`;
const opened: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  raw = await rawClient();
});
afterAll(async () => {
  for (const item of opened.reverse()) await item.close();
  await raw.close();
});

interface Span {
  name: string;
  collection: string;
  start: number;
  end: number;
}

/** A backend on its own client whose commands are recorded while `recording` is on. */
async function monitoredBackend(options: Partial<CloudqBackendOptions> = {}) {
  const client = new MongoClient(mongoUrl(), { monitorCommands: true });
  const spans: Span[] = [];
  const open = new Map<number, Omit<Span, "end">>();
  const state = { recording: false };
  client.on("commandStarted", (event: CommandStartedEvent) => {
    if (!state.recording) return;
    const collection = String(event.command[event.commandName] ?? "");
    open.set(event.requestId, { name: event.commandName, collection, start: performance.now() });
  });
  const done = (event: { requestId: number }) => {
    const started = open.get(event.requestId);
    if (!started) return;
    open.delete(event.requestId);
    spans.push({ ...started, end: performance.now() });
  };
  client.on("commandSucceeded", (event: CommandSucceededEvent) => done(event));
  client.on("commandFailed", done);
  await client.connect();
  const backend = createCloudqBackend({ client, database, ...options } as CloudqBackendOptions);
  await backend.ready();
  opened.push(client, backend);
  return { backend, spans, state };
}

async function plainBackend(options: Partial<CloudqBackendOptions> = {}): Promise<Backend> {
  const backend = createCloudqBackend({ url: mongoUrl(), database, ...options } as CloudqBackendOptions);
  await backend.ready();
  opened.push(backend);
  return backend;
}

/** Commands whose time on the wire overlaps count as one round trip: the sequential stages. */
function roundTrips(spans: Span[]): number {
  let trips = 0;
  let until = Number.NEGATIVE_INFINITY;
  for (const span of [...spans].sort((a, b) => a.start - b.start)) {
    if (span.start > until) trips++;
    until = Math.max(until, span.end);
  }
  return trips;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("cloudq-mongo: completeAndReserve round trips (issue 14)", () => {
  // Steady state: candidates pooled (one sorted find serves up to 200 reserves) and claim tokens
  // taken 16 at a time, so what each job costs is the completion, the pause check and the claim.
  for (const completion of MODES) {
    const perJob = completion === "mark-deleted" ? 2 : 3;
    it(`${completion}: a chained job costs ${perJob} commands in 2 round trips, besides the pooled find and token inserts`, async () => {
      const { backend, spans, state } = await monitoredBackend({ completion, candidateTtlMs: 60_000 });
      const q = queue();
      const WARM = 31;
      const MEASURED = 32;
      await backend.enqueueBulk(
        q,
        Array.from({ length: WARM + MEASURED + 1 }, (_, n) => ({ name: "chain", data: [n] })),
      );
      let [job] = await backend.reserve(q, { worker: "w" });
      for (let n = 0; n < WARM && job; n++) [job] = (await completeAndReserve(backend, q, job.id, { worker: "w" }, { worker: "w" })).next;
      state.recording = true;
      const done: Job[] = [];
      for (let n = 0; n < MEASURED && job; n++) {
        const step = await completeAndReserve(backend, q, job.id, { worker: "w" }, { worker: "w" });
        done.push(step.completed);
        [job] = step.next;
      }
      state.recording = false;
      expect(done).toHaveLength(MEASURED);
      const count = (name: string, collection?: string) =>
        spans.filter((span) => span.name === name && (collection === undefined || span.collection === collection)).length;
      const pooled = count("insert", "cloudq.claims") + count("find", "cloudq.jobs");
      // Per job: the pause check, the claim's update command and, in `remove` mode, the completion's findAndModify.
      expect(count("find", "cloudq.paused")).toBe(MEASURED);
      expect(count("update", "cloudq.jobs")).toBe(MEASURED);
      expect(count("findAndModify", "cloudq.jobs")).toBe(completion === "remove" ? MEASURED : 0);
      expect(spans.length - pooled).toBe(perJob * MEASURED);
      // What the pool costs on top: a token insert per 16 jobs and a find per 200 (slack for a slow machine).
      expect(pooled).toBeLessThanOrEqual(MEASURED / 4);
      // The pause check runs beside the completion (remove) or the candidates (mark-deleted): two stages a job.
      expect(roundTrips(spans.filter((span) => span.collection !== "cloudq.claims"))).toBeLessThanOrEqual(2 * MEASURED + pooled);
      expect(roundTrips(spans)).toBeLessThanOrEqual(2 * MEASURED + pooled);
    }, 120_000);
  }

  it("without candidateTtlMs the order stays strict: each job also pays its own find and token insert", async () => {
    const { backend, spans, state } = await monitoredBackend({ completion: "remove" });
    const q = queue();
    await backend.enqueueBulk(
      q,
      Array.from({ length: 11 }, (_, n) => ({ name: "strict", data: [n] })),
    );
    let [job] = await backend.reserve(q, { worker: "w" });
    state.recording = true;
    for (let n = 0; n < 10 && job; n++) [job] = (await completeAndReserve(backend, q, job.id, { worker: "w" }, { worker: "w" })).next;
    state.recording = false;
    // On FerretDB 1.x (the test server) the candidates are read by two finds at once, one per native state (ServerTraits).
    expect(spans.filter((span) => span.collection === "cloudq.jobs" && span.name === "find")).toHaveLength(2 * 10);
    expect(spans.length).toBeLessThanOrEqual(6 * 10);
    expect(roundTrips(spans)).toBeLessThanOrEqual(3 * 10);
  }, 60_000);
});

describe("cloudq-mongo: completeAndReserve keeps the guarantees of complete() then reserve()", () => {
  for (const completion of MODES) {
    it(`${completion}: 3 backends x 2 workers chaining over 150 jobs complete each job exactly once, each handed out once`, async () => {
      const q = queue();
      // Pooled backends hold tokens ahead; a strict one reads afresh each time: both kinds race.
      const backends = [
        await plainBackend({ completion, candidateTtlMs: 60_000 }),
        await plainBackend({ completion, candidateTtlMs: 60_000 }),
        await plainBackend({ completion }),
      ];
      const N = 150;
      const ids = (
        await backends[0]?.enqueueBulk(
          q,
          Array.from({ length: N }, (_, n) => ({ name: "race", data: [n] })),
        )
      )?.map((result) => result.job.id);
      const handedOut: string[] = [];
      const completed: string[] = [];
      await Promise.all(
        backends.flatMap((backend, b) =>
          [0, 1].map(async (w) => {
            const worker = `b${b}w${w}`;
            let [job] = await backend.reserve(q, { worker, leaseMs: 300_000 });
            while (job) {
              handedOut.push(job.id);
              const step = await completeAndReserve(backend, q, job.id, { worker, result: job.id }, { worker, leaseMs: 300_000 });
              expect(step.completed).toMatchObject({ id: job.id, state: "completed" });
              completed.push(step.completed.id);
              [job] = step.next;
            }
          }),
        ),
      );
      expect([...handedOut].sort()).toEqual([...(ids ?? [])].sort());
      expect([...completed].sort()).toEqual([...(ids ?? [])].sort());
      // The store agrees: nothing left to run, and no job was ever claimed a second time.
      if (completion === "remove") expect(await jobs().countDocuments({ queue: q })).toBe(0);
      else {
        const left = await jobs().find({ queue: q }).toArray();
        expect(left).toHaveLength(N);
        expect(left.filter((doc) => doc.queue_state !== "deleted" || doc.switchyard?.attempts !== 1)).toEqual([]);
      }
    }, 300_000);

    it(`${completion}: a refused completion claims nothing and throws what complete() throws`, async () => {
      const q = queue();
      const first = await plainBackend({ completion, candidateTtlMs: 60_000 });
      const second = await plainBackend({ completion });
      await first.enqueueBulk(q, [{ name: "held" }, { name: "next-1" }, { name: "next-2" }]);
      const [held] = await first.reserve(q, { worker: "w1", leaseMs: 100 });
      if (!held) throw new Error("nothing reserved");
      const queued = async () => jobs().countDocuments({ queue: q, queue_state: "queued", "switchyard.attempts": { $exists: false } });
      expect(await queued()).toBe(2);
      const refusedBy = async (call: Promise<unknown>) => {
        const error = await call.then(
          () => undefined,
          (caught: unknown) => caught,
        );
        return { name: (error as Error | undefined)?.constructor.name, code: (error as { code?: string } | undefined)?.code };
      };

      // Another worker: the lease is w1's.
      const wrongWorker = await refusedBy(completeAndReserve(first, q, held.id, { worker: "w2" }, { worker: "w2" }));
      expect(wrongWorker).toEqual({ name: "LeaseLostError", code: "LEASE_LOST" });
      expect(await refusedBy(first.complete(q, held.id, { worker: "w2" }))).toEqual(wrongWorker);
      expect(await queued()).toBe(2);

      // The lease ran out and another backend took the job: the handed-out document is stale.
      await sleep(150);
      const [again] = await second.reserve(q, { worker: "w9" });
      expect(again).toMatchObject({ id: held.id, attempts: 2 });
      const lost = await refusedBy(completeAndReserve(first, q, held.id, { worker: "w1" }, { worker: "w1" }));
      expect(lost).toEqual({ name: "LeaseLostError", code: "LEASE_LOST" });
      expect(await refusedBy(first.complete(q, held.id, { worker: "w1" }))).toEqual(lost);
      expect(await queued()).toBe(2);

      // Canceled meanwhile: not active any more.
      await second.cancel(q, held.id);
      const canceled = await refusedBy(completeAndReserve(first, q, held.id, { worker: "w9" }, { worker: "w9" }));
      expect(canceled).toEqual({ name: "InvalidStateError", code: "INVALID_STATE" });
      expect(await refusedBy(first.complete(q, held.id, { worker: "w9" }))).toEqual(canceled);
      expect(await queued()).toBe(2);

      // The candidates taken meanwhile went back: both jobs are still handed out, in order.
      const both = await first.reserve(q, { worker: "w1", count: 2 });
      expect(both.map((job) => job.name)).toEqual(["next-1", "next-2"]);
    }, 60_000);

    it(`${completion}: on a queue another backend paused, the completion is made and nothing is claimed`, async () => {
      const q = queue();
      const pooled = await plainBackend({ completion, candidateTtlMs: 60_000 });
      const other = await plainBackend({ completion });
      await pooled.enqueueBulk(
        q,
        Array.from({ length: 4 }, (_, n) => ({ name: `job-${n}` })),
      );
      const [first] = await pooled.reserve(q, { worker: "w" });
      const [second] = (await completeAndReserve(pooled, q, first?.id ?? "", { worker: "w" }, { worker: "w" })).next;
      expect(second?.name).toBe("job-1");
      await other.pause(q);
      const paused = await completeAndReserve(pooled, q, second?.id ?? "", { worker: "w" }, { worker: "w" });
      expect(paused.completed).toMatchObject({ id: second?.id, state: "completed" });
      expect(paused.next).toEqual([]);
      expect(await pooled.reserve(q, { worker: "w" })).toEqual([]);
      expect(await jobs().countDocuments({ queue: q, queue_state: "reserved" })).toBe(0);
      await other.resume(q);
      expect((await pooled.reserve(q, { worker: "w" }))[0]?.name).toBe("job-2");
    }, 60_000);

    it(`${completion}: the completed job's dependents are released, and progress reported through another backend is answered`, async () => {
      const q = queue();
      const backend = await plainBackend({ completion, candidateTtlMs: 60_000 });
      const other = await plainBackend({ completion });
      const { job: parent } = await backend.enqueue(q, { name: "parent" });
      const { job: child } = await backend.enqueue(q, { name: "child", dependsOn: [parent.id] });
      await backend.enqueue(q, { name: "other" });
      const [taken] = await backend.reserve(q, { worker: "w" });
      expect(taken?.id).toBe(parent.id);
      // Progress reported elsewhere (a worker's heartbeat through another gateway).
      await other.heartbeat(q, parent.id, { worker: "w", progress: { pct: 90 } });
      const step = await completeAndReserve(backend, q, parent.id, { worker: "w", result: { ok: 1 } }, { worker: "w" });
      expect(step.completed).toMatchObject({ id: parent.id, state: "completed", progress: { pct: 90 } });
      if (completion === "mark-deleted") expect(step.completed.result).toEqual({ ok: 1 });
      expect(step.next.map((job) => job.name)).toEqual(["other"]);
      expect(await backend.get(q, child.id)).toMatchObject({ state: "waiting" });
      const last = await completeAndReserve(backend, q, step.next[0]?.id ?? "", { worker: "w" }, { worker: "w" });
      expect(last.next.map((job) => job.id)).toEqual([child.id]);
      expect((await jobs().findOne(rawFilter(q, child.id)))?.switchyard).toMatchObject({ attempts: 1, lease: { worker: "w" } });
    }, 60_000);
  }
});
