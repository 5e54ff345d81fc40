import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@switchyard/conformance";
import { afterAll, describe, expect, it } from "vitest";
import { type StoreName, type StoreUnderTest, openStore } from "./matrix-backends.js";
import { type GatewayProcess, startGatewayProcess } from "./support/gateway-process.js";

/**
 * The gateway process killed with SIGKILL in the middle of a burst of enqueues from 50 concurrent
 * clients: every job a client got a 2xx for is in the store when the gateway is back, and clients
 * that retry what was not acknowledged, with the same unique key, create no second job. Each
 * request carries `uniqueKey: burst-<n>`, so after the burst the store must hold exactly one job
 * per key, whether its first try was answered, lost in flight, or never sent.
 */
const BURST = 20_000;
const CONCURRENCY = 50;
/** The kill comes once this many enqueues were acknowledged, about a third of the burst. */
const KILL_AFTER_ACKS = 6_000;
/** How long the gateway is held stopped before the kill, time for the clients to send their next requests. */
const FROZEN_MS = 300;
/**
 * SQLite lives inside the killed process (its WAL must hold every committed enqueue); Redis is a
 * server the kill does not touch. (PostgreSQL, slower to fill on two cores, has its own crash in
 * store-restart.test.ts.)
 */
const STORES: Array<{ name: StoreName; redisDb?: number }> = [{ name: "sqlite" }, { name: "glidemq", redisDb: 14 }];

const dir = mkdtempSync(join(tmpdir(), "switchyard-gateway-kill-"));
const processes: GatewayProcess[] = [];
afterAll(() => {
  for (const { child } of processes) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

interface Acknowledged {
  id: string;
  created: boolean;
}

/** The request never got an answer: the connection was refused or cut (fetch rejects with a TypeError). */
const isLostRequest = (error: unknown) => error instanceof TypeError;

async function enqueue(url: string, queue: string, n: number): Promise<Acknowledged> {
  const res = await fetch(`${url}/v1/queues/${queue}/jobs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "burst", data: { n }, uniqueKey: `burst-${n}` }),
  });
  const text = await res.text();
  // Anything but a 201 from a live gateway is a failure of the test, not a lost request.
  if (res.status !== 201) throw new Error(`enqueue ${n} answered ${res.status}: ${text.slice(0, 500)}`);
  const { job, created } = JSON.parse(text) as { job: { id: string }; created: boolean };
  return { id: job.id, created };
}

/** Sends `numbers` through `clients` concurrent clients; stops taking new ones once `stop()` holds. */
async function sendAll(
  clients: number,
  numbers: number[],
  send: (n: number) => Promise<void>,
  stop: () => boolean = () => false,
): Promise<void> {
  let next = 0;
  const client = async () => {
    while (!stop() && next < numbers.length) await send(numbers[next++]!);
  };
  await Promise.all(Array.from({ length: clients }, client));
}

for (const { name, redisDb } of STORES) {
  describe(`the gateway killed with SIGKILL during ${BURST} enqueues at c=${CONCURRENCY}, on ${name}`, () => {
    let store: StoreUnderTest;
    afterAll(async () => {
      await store?.dispose();
    });

    it("keeps every acknowledged job, and retries with the unique key make no duplicate", async () => {
      store = openStore(name, redisDb);
      const queue = store.track(`burst-${Math.random().toString(36).slice(2, 10)}`);
      const config = { backends: { main: { type: store.spec.type, url: store.spec.url, options: store.spec.options } } };

      const first = await startGatewayProcess(dir, `${name}-first`, config);
      processes.push(first);
      const acknowledged = new Map<number, Acknowledged>();
      const unanswered: number[] = [];
      let killed = false;
      const everyNumber = Array.from({ length: BURST }, (_, n) => n);
      const killer = (async () => {
        await eventually(async () => acknowledged.size >= KILL_AFTER_ACKS, `${KILL_AFTER_ACKS} acknowledged enqueues`, 60_000);
        // Frozen first, so the kill finds requests in its hands: a gateway faster than its clients
        // may have answered every request it was sent by the time a bare kill lands (the answers
        // then sit in the clients' sockets), and the burst would not be cut mid-flight.
        first.child.kill("SIGSTOP");
        await new Promise((resolve) => setTimeout(resolve, FROZEN_MS));
        killed = true;
        first.child.kill("SIGKILL");
      })();
      await sendAll(
        CONCURRENCY,
        everyNumber,
        async (n) => {
          try {
            acknowledged.set(n, await enqueue(first.url, queue, n));
          } catch (error) {
            if (!killed || !isLostRequest(error)) throw error;
            unanswered.push(n);
          }
        },
        () => killed,
      );
      await killer;
      expect(await first.exited).toBeNull();
      // The kill came mid-burst: requests were in flight and some of the burst was never sent.
      expect(unanswered.length).toBeGreaterThan(0);
      const neverSent = everyNumber.filter((n) => !acknowledged.has(n) && !unanswered.includes(n));
      expect(neverSent.length).toBeGreaterThan(0);
      const second = await startGatewayProcess(dir, `${name}-second`, config);
      processes.push(second);
      // Read from the store itself, not through the gateway: every acknowledged job survived the kill.
      const missing: number[] = [];
      await sendAll(CONCURRENCY, [...acknowledged.keys()], async (n) => {
        if ((await store.nativeState(queue, acknowledged.get(n)!.id)) === null) missing.push(n);
      });
      expect(missing).toEqual([]);
      // The clients retry what got no answer, with the same unique key, and send the rest of the burst.
      const retried = new Map<number, Acknowledged>();
      await sendAll(CONCURRENCY, [...unanswered, ...neverSent], async (n) => {
        retried.set(n, await enqueue(second.url, queue, n));
      });
      // A request lost in flight may or may not have been stored; one never sent cannot have been.
      expect(neverSent.every((n) => retried.get(n)!.created)).toBe(true);
      const ids = new Set([...acknowledged.values(), ...retried.values()].map(({ id }) => id));
      expect(ids.size).toBe(BURST);
      expect(await store.countJobs(queue)).toBe(BURST);
      second.child.kill("SIGTERM");
      expect(await second.exited).toBe(0);
    }, 120_000);
  });
}
