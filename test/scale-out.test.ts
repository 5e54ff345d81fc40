import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@switchyard/conformance";
import { createGlideMqBackend } from "@switchyard/glidemq-valkey";
import { afterAll, describe, expect, it } from "vitest";
import { CLI_FROM_SOURCE } from "../apps/gateway/test/helpers.js";
import { serviceUrl } from "./support/services.js";

/**
 * Scale-out: the gateway keeps no state of its own, so two processes on one store hand every job out
 * once, and one of them stopped with SIGTERM mid-run finishes what it was answering and loses
 * nothing. The store is glide-mq's layout on Redis; HTTP workers alternate between the gateways.
 */
const JOBS = 50_000;
const WORKERS = 8;
const dir = mkdtempSync(join(tmpdir(), "switchyard-scale-"));
const queue = `scale-${randomBytes(4).toString("hex")}`;
const redisUrl = `${serviceUrl("redis").replace(/\/\d*$/, "")}/13`;
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

async function startGateway(name: string): Promise<{ url: string; child: ChildProcess; exited: Promise<number | null> }> {
  const config = join(dir, `${name}.json`);
  writeFileSync(config, JSON.stringify({ backends: { main: { type: "glidemq-valkey", url: redisUrl } } }));
  const child = spawn(
    process.execPath,
    [...CLI_FROM_SOURCE, "serve", "--config", config, "--host", "127.0.0.1", "--port", "0", "--log-level", "warn"],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  children.push(child);
  let out = "";
  child.stdout?.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    out += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const url = await eventually(async () => /listening on (http:\/\/\S+)/.exec(out)?.[1], `gateway ${name} to listen (${out})`, 30_000);
  return { url, child, exited };
}

/** What the routes used here answer: a reserve's jobs, or nothing the test reads. */
interface Answer {
  status: number;
  json: { jobs: Array<{ id: string }> };
}

async function post(url: string, body: unknown): Promise<Answer> {
  const res = await fetch(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  return { status: res.status, json: (await res.json()) as Answer["json"] };
}

describe("two gateway processes on one store", () => {
  it(`hand out and complete ${JOBS} jobs exactly once while one of them is stopped with SIGTERM`, async () => {
    const [a, b] = await Promise.all([startGateway("a"), startGateway("b")]);
    const gateways = [a, b];
    for (let start = 0; start < JOBS; start += 1000) {
      const jobs = Array.from({ length: 1000 }, (_, i) => ({ name: "work", data: { n: start + i } }));
      const added = await post(`${gateways[(start / 1000) % 2]!.url}/v1/queues/${queue}/jobs/bulk`, { jobs });
      expect(added.status).toBe(201);
    }

    const handedOut = new Map<string, number>();
    let completed = 0;
    let bStopping = false;
    /** The gateway of this turn: b's turns go to a once b is being stopped, as a load balancer's would. */
    const pick = (turn: number) => (bStopping || turn % 2 === 0 ? a.url : b.url);
    /** A request b refused because it no longer listens is sent to a. */
    const send = async (turn: number, path: string, body: unknown) => {
      try {
        return await post(`${pick(turn)}${path}`, body);
      } catch (error) {
        if (!bStopping) throw error;
        return post(`${a.url}${path}`, body);
      }
    };
    const worker = async (index: number) => {
      for (let turn = index; ; turn++) {
        const reserved = await send(turn, `/v1/queues/${queue}/reserve`, { worker: `w${index}`, count: 50, leaseMs: 300_000 });
        expect(reserved.status).toBe(200);
        if (reserved.json.jobs.length === 0) return;
        for (const job of reserved.json.jobs) {
          handedOut.set(job.id, (handedOut.get(job.id) ?? 0) + 1);
          const done = await send(turn, `/v1/queues/${queue}/jobs/${job.id}/complete`, { worker: `w${index}` });
          expect(done.status).toBe(200);
          completed++;
        }
      }
    };
    const stopB = (async () => {
      await eventually(async () => completed >= JOBS / 3, "a third of the jobs to be done", 120_000);
      bStopping = true;
      b.child.kill("SIGTERM");
      return b.exited;
    })();
    await Promise.all(Array.from({ length: WORKERS }, (_, index) => worker(index)));
    expect(await stopB).toBe(0);

    expect(handedOut.size).toBe(JOBS);
    expect([...handedOut.values()].every((count) => count === 1)).toBe(true);
    const store = createGlideMqBackend({ url: redisUrl });
    try {
      const counts = await store.counts(queue);
      expect(counts).toMatchObject({ completed: JOBS, waiting: 0, active: 0, delayed: 0, failed: 0 });
    } finally {
      await store.close();
    }
    a.child.kill("SIGTERM");
    expect(await a.exited).toBe(0);
  }, 300_000);
});
