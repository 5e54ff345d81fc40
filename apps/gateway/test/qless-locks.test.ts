import { afterEach, describe, expect, it } from "vitest";
import { type TestGateway, openTestGateway } from "./helpers.js";

/**
 * qless's settings that decide how jobs run, applied on a SQLite store (issue 16): a lock that ran out
 * is given `grace-period` seconds and then handed out again or failed for want of retries, a negative
 * `heartbeat` gives a lock that has run out already, `<queue>-max-concurrency` caps the running jobs,
 * and `jobs-history-count` / `jobs-history` bound the completed jobs kept. Each test has its own
 * gateway (settings are the gateway's), drives the qless door at the `now` it passes, and probes the
 * SQLite rows directly.
 */
const opened: TestGateway[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((gateway) => gateway.cleanup()));
});

async function qlessGateway(queue: string) {
  const t = await openTestGateway();
  opened.push(t);
  const qless = async (command: string, now: number, args: Array<string | number>) => {
    const res = await t.request("POST", `/qless/${command}`, { now, queue, args });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    return res.json.reply;
  };
  const row = (jid: string) => t.nativeRows().find((candidate) => candidate.sy_job_id === jid);
  return { qless, row, rows: () => t.nativeRows() };
}

describe("qless's locks on a SQLite store", () => {
  it("each run whose lock ran out gets grace-period seconds at the next pop before it is handed out again", async () => {
    const { qless, row } = await qlessGateway("grace");
    await qless("put", 0, ["client", "grace", "j1", "Klass", "{}", 0]);
    expect((await qless("pop", 0, ["grace", "w1", 1]))[0]).toMatchObject({ worker: "w1", expires: 60 });
    // Ran out at 60: at 70 the worker keeps it until 80 (grace-period 10, qless's default)...
    expect(await qless("pop", 70, ["grace", "w2", 1])).toEqual({});
    expect(row("j1")).toMatchObject({ sy_worker: "w1", sy_lease_until: 80_000, attempts: 1 });
    // ...and at 80 it is another worker's, one retry spent.
    expect((await qless("pop", 80, ["grace", "w2", 1]))[0]).toMatchObject({ worker: "w2", expires: 140, remaining: 4 });
    // The new run has its own grace when its lock runs out.
    expect(await qless("pop", 150, ["grace", "w3", 1])).toEqual({});
    expect(row("j1")).toMatchObject({ sy_worker: "w2", sy_lease_until: 160_000, attempts: 2 });
  });

  it("a job whose lock ran out with no retry left fails with failed-retries-<queue> at the next pop, and does not run again", async () => {
    const { qless, row } = await qlessGateway("spent");
    await qless("config.set", 0, ["grace-period", 0]);
    await qless("put", 0, ["client", "spent", "j1", "Klass", "{}", 0, "retries", 0]);
    await qless("pop", 0, ["spent", "w1", 1]);
    expect(await qless("pop", 70, ["spent", "w2", 1])).toEqual({});
    expect(row("j1")).toMatchObject({ status: "error", attempts: 1 });
    expect(await qless("get", 71, ["j1"])).toMatchObject({
      state: "failed",
      failure: { group: "failed-retries-spent", message: 'Job exhausted retries in queue "spent"' },
    });
    expect(await qless("failed", 71, ["failed-retries-spent"])).toEqual({ total: 1, jobs: ["j1"] });
  });

  it("a negative heartbeat gives a lock that has run out already: another worker's pop at the same now takes the job", async () => {
    const { qless, row } = await qlessGateway("negative");
    await qless("config.set", 0, ["grace-period", 0]);
    await qless("config.set", 0, ["heartbeat", -10]);
    await qless("put", 0, ["client", "negative", "j1", "Klass", "{}", 0, "retries", 5]);
    expect((await qless("pop", 0, ["negative", "w1", 1]))[0]).toMatchObject({ worker: "w1", expires: -10 });
    expect(row("j1")).toMatchObject({ sy_lease_until: -10_000 });
    expect((await qless("pop", 0, ["negative", "w2", 1]))[0]).toMatchObject({ worker: "w2", retries: 5, remaining: 4 });
  });

  it("<queue>-max-concurrency: a pop hands out at most the limit less the running jobs, also when pops come at once", async () => {
    const { qless } = await qlessGateway("capped");
    await qless("config.set", 0, ["capped-max-concurrency", 2]);
    for (const jid of ["a", "b", "c", "d", "e"]) await qless("put", 0, ["client", "capped", jid, "Klass", "{}", 0]);
    const pops = await Promise.all([1, 2, 3, 4].map((n) => qless("pop", 1, ["capped", `w${n}`, 1])));
    expect(pops.flatMap((reply) => (Array.isArray(reply) ? reply : [])).map((job) => job.jid)).toEqual(["a", "b"]);
    expect(await qless("pop", 1, ["capped", "w1", 10])).toEqual({});
    // A completion makes room for one more.
    const [holder] = await qless("jobs", 2, ["running", "capped"]);
    const worker = (await qless("get", 2, [holder])).worker;
    await qless("complete", 2, [holder, worker, "capped", "{}"]);
    expect((await qless("pop", 3, ["capped", "w1", 10])).map((job: { jid: string }) => job.jid)).toEqual(["c"]);
  });
});

describe("qless's completed-job history on a SQLite store", () => {
  it("jobs-history-count: each completion deletes the completed jobs beyond the newest count, rows and tags", async () => {
    const { qless, row } = await qlessGateway("history");
    await qless("config.set", 0, ["jobs-history-count", 2]);
    for (const [n, jid] of ["a", "b", "c"].entries()) {
      await qless("put", n, ["client", "history", jid, "Klass", "{}", 0, "tags", '["kept"]']);
      await qless("pop", n, ["history", "w1", 1]);
      await qless("complete", n, [jid, "w1", "history", "{}"]);
    }
    expect(row("a")).toBeUndefined();
    expect(row("b")).toMatchObject({ status: "complete" });
    expect(await qless("jobs", 3, ["complete"])).toEqual(["c", "b"]);
    expect(await qless("tag", 3, ["get", "kept", 0, 10])).toEqual({ total: 2, jobs: ["b", "c"] });
  });

  it("jobs-history: a completion deletes the jobs completed that many seconds before its now, or earlier", async () => {
    const { qless, row } = await qlessGateway("aged");
    await qless("config.set", 0, ["jobs-history", 100]);
    await qless("put", 0, ["client", "aged", "old", "Klass", "{}", 0]);
    await qless("pop", 0, ["aged", "w1", 1]);
    await qless("complete", 0, ["old", "w1", "aged", "{}"]);
    await qless("put", 99, ["client", "aged", "new", "Klass", "{}", 0]);
    await qless("pop", 99, ["aged", "w1", 1]);
    await qless("complete", 99, ["new", "w1", "aged", "{}"]);
    expect(row("old")).toMatchObject({ status: "complete" });
    // A job put again since it completed is no longer a completed job, and stays.
    await qless("put", 100, ["client", "aged", "new", "Klass", "{}", 0]);
    // Completed jobs of every queue are one history, as qless's `ql:completed`.
    await qless("put", 101, ["client", "aged-2", "next", "Klass", "{}", 0]);
    await qless("pop", 201, ["aged-2", "w1", 1]);
    await qless("complete", 201, ["next", "w1", "aged-2", "{}"]);
    expect(row("old")).toBeUndefined();
    expect(row("new")).toMatchObject({ status: "pending" });
    expect(row("next")).toMatchObject({ status: "complete" });
  });
});

describe("qless's tags on a SQLite store", () => {
  it("numbers in a put's tags are tags named as Lua writes the number", async () => {
    const { qless } = await qlessGateway("numeric");
    await qless("put", 0, ["client", "numeric", "j1", "Klass", "{}", 0, "tags", "[1, 2.5, 1e20]"]);
    await qless("put", 0, ["client", "numeric", "j2", "Klass", "{}", 0, "tags", '[1, "1"]']);
    expect((await qless("get", 0, ["j1"])).tags).toEqual(["1", "2.5", "1e+20"]);
    expect(await qless("tag", 0, ["get", "1", 0, 10])).toEqual({ total: 2, jobs: ["j1", "j2"] });
    expect(await qless("tag", 0, ["top", 0, 10])).toEqual(["1"]);
  });
});
