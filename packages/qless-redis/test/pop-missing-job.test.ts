import { describe, expect, it } from "vitest";
import { QlessScriptError } from "../src/index.js";
import { usePrivateQless } from "./helpers/private-redis.js";

const qless = usePrivateQless();
const now = () => Date.now() / 1000;

describe("qless-redis: pop over a jid whose job hash is gone", () => {
  it("raises as qless-core does and writes no stub job, no lock and no worker entry for it", async () => {
    await qless.backend.qless("put", now(), "w", "orphans", "orphan-1", "Klass", "{}", 0);
    await qless.redis.del("ql:j:orphan-1", "ql:j:orphan-1-history");

    const popped = qless.backend.qless("pop", now(), "orphans", "worker-1", 1);
    await expect(popped).rejects.toBeInstanceOf(QlessScriptError);
    await expect(popped).rejects.toThrow(/orphan-1/);

    expect(await qless.redis.exists("ql:j:orphan-1")).toBe(0);
    expect(await qless.redis.zscore("ql:q:orphans-locks", "orphan-1")).toBeNull();
    expect(await qless.redis.zscore("ql:w:worker-1:jobs", "orphan-1")).toBeNull();
    // The jid stays where qless-core leaves it, so an operator can see and remove it.
    expect(await qless.redis.zscore("ql:q:orphans-work", "orphan-1")).not.toBeNull();
  });

  it("a job popped in the same call before the orphan is not marked running either", async () => {
    await qless.backend.qless("put", now(), "w", "mixed", "healthy-1", "Klass", "{}", 0, "priority", 10);
    await qless.backend.qless("put", now(), "w", "mixed", "orphan-2", "Klass", "{}", 0);
    await qless.redis.del("ql:j:orphan-2");

    await expect(qless.backend.qless("pop", now(), "mixed", "worker-2", 2)).rejects.toBeInstanceOf(QlessScriptError);
    expect(await qless.redis.hget("ql:j:healthy-1", "state")).toBe("waiting");
    expect(await qless.redis.zscore("ql:q:mixed-work", "healthy-1")).not.toBeNull();
  });
});
