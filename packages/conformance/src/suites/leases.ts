import { describe, expect, it } from "vitest";
import { type ConformanceOptions, eventually, reserveOne, titled, useBackend } from "../context.js";

export function leaseSuite(options: ConformanceOptions): void {
  const { title, skip } = titled(options, "leases and heartbeats", ["leases"]);
  describe.skipIf(skip)(title, () => {
    const ctx = useBackend(options);

    it("heartbeat() by the lease holder extends the lease", async () => {
      const queue = ctx.queue();
      await ctx.backend.enqueue(queue, { name: "long" });
      const job = await reserveOne(ctx, queue, "worker-a", 5_000);
      const beat = await ctx.backend.heartbeat(queue, job.id, { worker: "worker-a", leaseMs: 60_000 });
      expect(beat.lease?.worker).toBe("worker-a");
      expect(beat.lease?.expiresAt).toBeGreaterThan((job.lease?.expiresAt ?? 0) + 30_000);
      expect(beat.state).toBe("active");
    });

    it("heartbeat() and complete() by a worker that does not hold the lease are refused with LeaseLostError", async () => {
      const queue = ctx.queue();
      await ctx.backend.enqueue(queue, { name: "mine" });
      const job = await reserveOne(ctx, queue, "worker-a");
      await expect(ctx.backend.heartbeat(queue, job.id, { worker: "worker-b" })).rejects.toMatchObject({ code: "LEASE_LOST" });
      await expect(ctx.backend.complete(queue, job.id, { worker: "worker-b" })).rejects.toMatchObject({ code: "LEASE_LOST" });
      await expect(ctx.backend.fail(queue, job.id, { worker: "worker-b", error: { message: "x" } })).rejects.toMatchObject({
        code: "LEASE_LOST",
      });
      expect(await ctx.backend.get(queue, job.id)).toMatchObject({ state: "active", lease: { worker: "worker-a" } });
    });

    it("a job whose lease expired is handed out again with its attempt counted, and the old holder is refused", async () => {
      const queue = ctx.queue();
      await ctx.backend.enqueue(queue, { name: "flaky", maxAttempts: 5 });
      const first = await reserveOne(ctx, queue, "worker-a", 300);
      expect(first.attempts).toBe(1);
      const again = await eventually(
        async () => (await ctx.backend.reserve(queue, { worker: "worker-b", leaseMs: 30_000 }))[0],
        "the expired job to come back",
      );
      expect(again).toMatchObject({ id: first.id, state: "active", attempts: 2, lease: { worker: "worker-b" } });
      await expect(ctx.backend.heartbeat(queue, first.id, { worker: "worker-a" })).rejects.toMatchObject({ code: "LEASE_LOST" });
      await expect(ctx.backend.complete(queue, first.id, { worker: "worker-a" })).rejects.toMatchObject({ code: "LEASE_LOST" });
      const done = await ctx.backend.complete(queue, first.id, { worker: "worker-b" });
      expect(done.state).toBe("completed");
    });

    it("a lease that has not expired keeps the job from other reservers", async () => {
      const queue = ctx.queue();
      await ctx.backend.enqueue(queue, { name: "held" });
      await reserveOne(ctx, queue, "worker-a", 60_000);
      expect(await ctx.backend.reserve(queue, { worker: "worker-b" })).toEqual([]);
    });
  });
}
