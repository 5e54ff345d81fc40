import { LeaseLostError, completeAndReserve } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { usePrivateQless } from "./helpers/private-redis.js";

const qless = usePrivateQless();

/** Script calls the private server has run so far (FCALL of the adapter's library, EVAL and EVALSHA of the script). */
async function scriptCalls(): Promise<number> {
  const stats = await qless.redis.info("commandstats");
  return [...stats.matchAll(/^cmdstat_(?:fcall|eval|evalsha):calls=(\d+)/gm)].reduce((sum, match) => sum + Number(match[1]), 0);
}

describe("qless-redis: completeAndReserve is one script call (switchyard.complete-and-pop)", () => {
  it("completes the job and pops the worker's next in one call, each as its own command leaves the keys", async () => {
    const { backend, redis } = qless;
    const [first, second] = await backend.enqueueBulk("cycle", [{ name: "first" }, { name: "second" }]);
    await backend.reserve("cycle", { worker: "w1" });
    const before = await scriptCalls();
    const { completed, next } = await completeAndReserve(
      backend,
      "cycle",
      first!.job.id,
      { worker: "w1", result: { n: 1 } },
      { worker: "w2" },
    );
    expect((await scriptCalls()) - before).toBe(1);

    expect(completed).toMatchObject({ id: first!.job.id, state: "completed", result: { n: 1 } });
    expect(next.map((job) => [job.id, job.state, job.lease?.worker])).toEqual([[second!.job.id, "active", "w2"]]);
    expect(await redis.hget(`ql:j:${first!.job.id}`, "state")).toBe("complete");
    expect(await redis.zscore("ql:completed", first!.job.id)).not.toBeNull();
    expect(await redis.hmget(`ql:j:${second!.job.id}`, "state", "worker")).toEqual(["running", "w2"]);
    expect(await redis.zscore("ql:q:cycle-locks", second!.job.id)).not.toBeNull();
    expect(await redis.zscore("ql:w:w2:jobs", second!.job.id)).not.toBeNull();
    expect(await redis.zcard("ql:q:cycle-work")).toBe(0);
  });

  it("a completion refused (another worker holds the job) raises its error and pops nothing", async () => {
    const { backend, redis } = qless;
    const [held, waiting] = await backend.enqueueBulk("refused", [{ name: "held" }, { name: "waiting" }]);
    await backend.reserve("refused", { worker: "owner" });
    await expect(
      completeAndReserve(backend, "refused", held!.job.id, { worker: "intruder" }, { worker: "intruder" }),
    ).rejects.toBeInstanceOf(LeaseLostError);
    expect(await redis.hmget(`ql:j:${held!.job.id}`, "state", "worker")).toEqual(["running", "owner"]);
    expect(await redis.hget(`ql:j:${waiting!.job.id}`, "state")).toBe("waiting");
    expect(await redis.zscore("ql:q:refused-work", waiting!.job.id)).not.toBeNull();
    expect(await redis.exists("ql:w:intruder:jobs")).toBe(0);
  });
});
