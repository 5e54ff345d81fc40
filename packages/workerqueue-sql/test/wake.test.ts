import { type Socket, createSocket } from "node:dgram";
import type { AddressInfo } from "node:net";
import { eventually } from "@switchyard/conformance";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createWorkerQueueBackend } from "../src/index.js";
import { MAX_UNITS_PER_FLUSH, MasterWaker, parseLegacyMaster } from "../src/wake.js";
import { rawKnex, removeSqliteFile, urlFor } from "./dialects.js";

/** A UDP socket standing in for a legacy master: it records every datagram it receives. */
async function listen(): Promise<{ port: number; received: string[]; close(): Promise<void> }> {
  const socket: Socket = createSocket("udp4");
  const received: string[] = [];
  socket.on("message", (message) => received.push(message.toString("latin1")));
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  return {
    port: (socket.address() as AddressInfo).port,
    received,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function setUp() {
  const [workq, rjqueue] = [await listen(), await listen()];
  const errors: Error[] = [];
  const waker = new MasterWaker(
    [
      { host: "127.0.0.1", port: workq.port, kind: "workq" },
      { host: "127.0.0.1", port: rjqueue.port, kind: "rjqueue" },
    ],
    (error) => errors.push(error),
  );
  cleanups.push(() => waker.close(), workq.close, rjqueue.close);
  return { workq, rjqueue, waker, errors };
}

describe("workerqueue-sql: waking legacy masters over UDP", () => {
  it("one wake-up sends workqd one datagram and rjqueue the byte `s`", async () => {
    const { workq, rjqueue, waker } = await setUp();
    waker.wake();
    await eventually(async () => workq.received.length === 1 && rjqueue.received.length === 1, "both masters to get a datagram");
    expect(workq.received).toEqual(["1"]);
    expect(rjqueue.received).toEqual(["s"]);
  });

  it("wake-ups in one turn are coalesced: workqd gets one datagram per job, rjqueue one datagram counting them", async () => {
    const { workq, rjqueue, waker } = await setUp();
    for (let i = 0; i < 5; i++) waker.wake();
    await eventually(async () => workq.received.length === 5 && rjqueue.received.length === 1, "the coalesced wake-up");
    expect(rjqueue.received).toEqual(["sssss"]);
  });

  it(`a burst announces at most ${MAX_UNITS_PER_FLUSH} jobs per flush (workqd's max_scheduled_per_idle)`, async () => {
    const { workq, rjqueue, waker } = await setUp();
    waker.wake(1000);
    await eventually(async () => workq.received.length === MAX_UNITS_PER_FLUSH && rjqueue.received.length === 1, "the capped flush");
    expect(rjqueue.received[0]).toHaveLength(MAX_UNITS_PER_FLUSH);
  });

  it("a master that cannot be reached is reported to onError and never throws from wake()", async () => {
    const errors: Error[] = [];
    const waker = new MasterWaker([{ host: "no-such-host.invalid", port: 4488, kind: "workq" }], (error) => errors.push(error));
    cleanups.push(() => waker.close());
    expect(() => waker.wake()).not.toThrow();
    await eventually(async () => errors.length > 0, "the lookup failure to be reported");
    expect(errors[0]?.message).toMatch(/no-such-host\.invalid/);
  });

  it("master addresses parse from host:port, workq:// and rjqueue:// with their default ports", () => {
    expect(parseLegacyMaster("10.0.0.5:4500")).toEqual({ host: "10.0.0.5", port: 4500, kind: "workq" });
    expect(parseLegacyMaster("workq://worker-1")).toEqual({ host: "worker-1", port: 4488, kind: "workq" });
    expect(parseLegacyMaster("rjqueue://127.0.0.1")).toEqual({ host: "127.0.0.1", port: 4321, kind: "rjqueue" });
    expect(parseLegacyMaster("[::1]:4488")).toEqual({ host: "::1", port: 4488, kind: "workq" });
    expect(() => parseLegacyMaster("udp://x:1")).toThrow(/not a master address/);
    expect(() => parseLegacyMaster("host:70000")).toThrow(/out of range/);
  });
});

describe("workerqueue-sql: the backend wakes legacy masters", () => {
  const url = urlFor("sqlite");
  afterAll(() => removeSqliteFile(url));

  async function backendWaking(options: { releaseDelayedEveryMs?: number } = {}) {
    const [workq, rjqueue] = [await listen(), await listen()];
    const backend = createWorkerQueueBackend({
      url,
      wakeMasters: [`127.0.0.1:${workq.port}`, `rjqueue://127.0.0.1:${rjqueue.port}`],
      releaseDelayedEveryMs: options.releaseDelayedEveryMs ?? 0,
    });
    await backend.ready();
    cleanups.push(() => backend.close(), workq.close, rjqueue.close);
    return { backend, workq, rjqueue };
  }

  it("each committed enqueue sends workqd one datagram and rjqueue one `s`; a bulk of 3 sends three and `sss`", async () => {
    const { backend, workq, rjqueue } = await backendWaking();
    await backend.enqueue("mail", { name: "send" });
    await eventually(async () => workq.received.length === 1 && rjqueue.received.length === 1, "the first wake-up");
    await backend.enqueueBulk("mail", [{ name: "a" }, { name: "b" }, { name: "c" }]);
    await eventually(async () => workq.received.length === 4 && rjqueue.received.length === 2, "the bulk's wake-up");
    expect(rjqueue.received).toEqual(["s", "sss"]);
  });

  it("a delayed job and a duplicate unique key announce nothing at enqueue", async () => {
    const { backend, workq } = await backendWaking();
    await backend.enqueue("mail", { name: "later", delay: 60_000 });
    await backend.enqueue("mail", { name: "once", uniqueKey: "k" });
    await backend.enqueue("mail", { name: "once", uniqueKey: "k" });
    // The one datagram of the unique job arrives; had the others sent any, they would precede or follow it.
    await eventually(async () => workq.received.length >= 1, "the unique job's wake-up");
    await backend.enqueue("mail", { name: "marker" });
    await eventually(async () => workq.received.length >= 2, "the marker's wake-up");
    expect(workq.received).toHaveLength(2);
  });

  it("with no reserve() at all, the timer frees a due delayed row for the legacy claim and wakes the masters", async () => {
    const { backend, workq } = await backendWaking({ releaseDelayedEveryMs: 50 });
    const { job } = await backend.enqueue("mail", { name: "later", delay: 200 });
    const probe = rawKnex(url);
    cleanups.push(() => probe.destroy());
    const row = () => probe("jobs").where("id", Number(job.id)).first("locked_queue_id", "status");
    expect(await row()).toMatchObject({ status: "pending", locked_queue_id: expect.stringContaining("sy:delayed") });
    await eventually(async () => (await row())?.locked_queue_id === "", "the timer to release the row");
    await eventually(async () => workq.received.length === 1, "the release's wake-up");
  });

  it("two gateways' timers on one table release a due row once: the masters hear of it once", async () => {
    const listener = await listen();
    cleanups.push(listener.close);
    const backends = [0, 1].map(() =>
      createWorkerQueueBackend({ url, wakeMasters: [`127.0.0.1:${listener.port}`], releaseDelayedEveryMs: 20 }),
    );
    for (const backend of backends) {
      await backend.ready();
      cleanups.push(() => backend.close());
    }
    await backends[0]?.enqueue("race", { name: "later", delay: 150 });
    await eventually(async () => listener.received.length >= 1, "a release");
    // Both timers keep running; a second datagram would mean the row was released twice.
    await backends[1]?.enqueue("race", { name: "marker" });
    await eventually(async () => listener.received.length >= 2, "the marker's wake-up");
    expect(listener.received).toHaveLength(2);
  });

  it("an enqueue succeeds when a master cannot be reached; the failure goes to onBackgroundError", async () => {
    const errors: Error[] = [];
    const backend = createWorkerQueueBackend({
      url,
      wakeMasters: ["no-such-host.invalid:4488"],
      releaseDelayedEveryMs: 0,
      onBackgroundError: (error) => errors.push(error),
    });
    cleanups.push(() => backend.close());
    const { created } = await backend.enqueue("mail", { name: "send" });
    expect(created).toBe(true);
    await eventually(async () => errors.length > 0, "the send failure to be reported");
  });
});
