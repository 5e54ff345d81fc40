import { hasDependencyEditing, hasDependentsLookup, hasJobEditing } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { DELAYED_LOCK, MYSQL_DELAYED_LOCK } from "../src/index.js";
import { DIALECTS, useDialectTable } from "./dialects.js";

/**
 * Job dependencies in the Worker Queue table (src/dependencies.ts): how a blocked job and its
 * parents look in the row, that the legacy claim passes a blocked job by, and when the completion
 * of a parent releases it; read in the table directly as well as through the Backend.
 */
for (const dialect of DIALECTS) {
  describe(`workerqueue-sql (${dialect}): dependencies`, () => {
    const { table, db, open, row, queue: nextQueue } = useDialectTable(dialect, "wq_deps");
    const queue = () => nextQueue("deps");
    const blockedLock = dialect === "mysql" ? "1:sy:blocked" : "sy:blocked";
    const delayedLock = dialect === "mysql" ? MYSQL_DELAYED_LOCK : DELAYED_LOCK;
    const rowOf = async (q: string, id: string) =>
      (await db(table).where({ sy_queue: q, sy_job_id: id }).first()) as Record<string, unknown>;
    const marked = (value: unknown) => value === true || Number(value) === 1;
    /** workqd's claim (specs/workerqueue.md, step 2), kept to one queue of the shared table: the rows a legacy daemon would take. */
    const legacyClaim = async (q: string, lock: string) => {
      await db(table).where({ sy_queue: q, status: "pending", locked_queue_id: "" }).update({ locked_queue_id: lock, status: "loading" });
      return db(table).where({ locked_queue_id: lock }).select("id");
    };

    it("a blocked job is a pending row with the blocked marker and its parents in sy_depends_on; its parent is marked", async () => {
      const wq = await open();
      const q = queue();
      const { job: parent } = await wq.enqueue(q, { name: "parent" });
      const { job: child } = await wq.enqueue(q, { name: "child", dependsOn: [parent.id] });
      expect(child).toMatchObject({ state: "blocked", dependsOn: [parent.id] });
      expect(await row(child.id)).toMatchObject({
        status: "pending",
        locked_queue_id: blockedLock,
        sy_depends_on: JSON.stringify([parent.id]),
      });
      expect(marked((await row(parent.id)).sy_has_dependents)).toBe(true);
      expect((await wq.counts(q)).blocked).toBe(1);
      expect((await wq.list(q, { state: "blocked" })).items.map((job) => job.id)).toEqual([child.id]);
      expect((await wq.list(q, { state: "waiting" })).items.map((job) => job.id)).toEqual([parent.id]);
      if (!hasDependentsLookup(wq)) throw new Error("workerqueue-sql declares DependentsLookup");
      expect(await wq.dependentsOf(q, [parent.id, child.id])).toEqual(new Map([[parent.id, [child.id]]]));
    });

    it("the legacy claim passes a blocked job by; the parent's completion unlocks it for every worker", async () => {
      const wq = await open();
      const q = queue();
      const { job: parent } = await wq.enqueue(q, { name: "parent" });
      const { job: child } = await wq.enqueue(q, { name: "child", dependsOn: [parent.id] });
      expect(await wq.reserve(q, { worker: "w", count: 5 })).toMatchObject([{ id: parent.id }]);
      expect(await legacyClaim(q, "legacy-1")).toEqual([]);
      await wq.complete(q, parent.id, { worker: "w" });
      expect(await row(child.id)).toMatchObject({ status: "pending", locked_queue_id: "" });
      expect((await wq.get(q, child.id))?.state).toBe("waiting");
      expect((await legacyClaim(q, "legacy-2")).map((taken) => Number(taken.id))).toEqual([Number(child.id)]);
    });

    it("a job with two parents waits for both; a parent that failed for good keeps it blocked; a finished parent does not block", async () => {
      const wq = await open();
      const q = queue();
      const { job: done } = await wq.enqueue(q, { id: `${q}-done`, name: "done" });
      await wq.reserve(q, { worker: "w" });
      await wq.complete(q, done.id, { worker: "w" });
      const { job: first } = await wq.enqueue(q, { id: `${q}-first`, name: "first" });
      const { job: second } = await wq.enqueue(q, { id: `${q}-second`, name: "second", maxAttempts: 1 });
      const { job: child } = await wq.enqueue(q, {
        id: `${q}-child`,
        name: "child",
        dependsOn: [done.id, first.id, second.id, "never-enqueued"],
      });
      expect(child.state).toBe("blocked");
      expect(marked((await rowOf(q, done.id)).sy_has_dependents)).toBe(false);
      const [a, b] = await wq.reserve(q, { worker: "w", count: 2 });
      expect([a?.id, b?.id]).toEqual([first.id, second.id]);
      await wq.complete(q, first.id, { worker: "w" });
      expect((await wq.get(q, child.id))?.state).toBe("blocked");
      await wq.fail(q, second.id, { worker: "w", error: { message: "gone for good" }, retry: false });
      expect((await wq.get(q, child.id))?.state).toBe("blocked");
      expect(await wq.reserve(q, { worker: "w" })).toEqual([]);
    });

    it("a blocked job with a run-at time ahead becomes delayed when released, and runs at its time", async () => {
      let now = Date.now();
      const wq = await open({ clock: () => now });
      const q = queue();
      const { job: parent } = await wq.enqueue(q, { name: "parent" });
      const { job: child } = await wq.enqueue(q, { name: "child", dependsOn: [parent.id], delay: 60_000 });
      await wq.reserve(q, { worker: "w" });
      await wq.complete(q, parent.id, { worker: "w" });
      expect(await row(child.id)).toMatchObject({ status: "pending", locked_queue_id: delayedLock });
      expect((await wq.get(q, child.id))?.state).toBe("delayed");
      now += 61_000;
      expect((await wq.reserve(q, { worker: "w" }))[0]?.id).toBe(child.id);
    });

    it("a completion racing with the enqueue of a job depending on it never leaves that job blocked (50 rounds)", async () => {
      const producer = await open();
      const worker = await open();
      const q = queue();
      for (let round = 0; round < 50; round++) {
        const { job: parent } = await worker.enqueue(q, { id: `${q}-p${round}`, name: "parent" });
        await worker.reserve(q, { worker: "w" });
        const [{ job: child }] = await Promise.all([
          producer.enqueue(q, { id: `${q}-c${round}`, name: "child", dependsOn: [parent.id] }),
          worker.complete(q, parent.id, { worker: "w" }),
        ]);
        const state = (await worker.get(q, child.id))?.state;
        expect(state, `round ${round}`).toBe("waiting");
        await worker.reserve(q, { worker: "w" });
        await worker.complete(q, child.id, { worker: "w" });
      }
      expect((await worker.counts(q)).completed).toBe(100);
    });

    it("import: a blocked job brought before its parent is released when the parent, imported later, completes", async () => {
      const source = await open();
      const target = await open();
      const from = queue();
      const to = queue();
      const { job: parent } = await source.enqueue(from, { id: `${from}-parent`, name: "parent" });
      const { job: child } = await source.enqueue(from, { id: `${from}-child`, name: "child", dependsOn: [parent.id] });
      await target.import(to, [child]);
      await target.import(to, [parent]);
      expect((await target.get(to, child.id))?.state).toBe("blocked");
      expect(marked((await rowOf(to, parent.id)).sy_has_dependents)).toBe(true);
      await target.reserve(to, { worker: "w" });
      await target.complete(to, parent.id, { worker: "w" });
      expect((await target.get(to, child.id))?.state).toBe("waiting");
    });

    it("a blocked job's parents change after enqueue: added ones are waited for, and with none unfinished left it runs at once", async () => {
      const wq = await open();
      const q = queue();
      const { job: first } = await wq.enqueue(q, { id: `${q}-first`, name: "first" });
      const { job: second } = await wq.enqueue(q, { id: `${q}-second`, name: "second" });
      const { job: child } = await wq.enqueue(q, { id: `${q}-child`, name: "child", dependsOn: [first.id], delay: 60_000 });
      if (!hasDependencyEditing(wq)) throw new Error("workerqueue-sql declares DependencyEditing");
      const added = await wq.addDependencies(q, child.id, [second.id, "never-enqueued"]);
      expect(added).toMatchObject({ state: "blocked", dependsOn: [first.id, second.id] });
      expect(marked((await rowOf(q, second.id)).sy_has_dependents)).toBe(true);
      expect((await wq.removeDependencies(q, child.id, [first.id])).state).toBe("blocked");
      const released = await wq.removeDependencies(q, child.id, "all");
      expect(released).toMatchObject({ state: "waiting", dependsOn: [] });
      expect(await rowOf(q, child.id)).toMatchObject({ status: "pending", locked_queue_id: "", sy_run_at: null });
      await expect(wq.addDependencies(q, child.id, [first.id])).rejects.toMatchObject({ code: "INVALID_STATE" });
    });

    it("a job put again in place with dependencies is blocked until they complete", async () => {
      const wq = await open();
      const q = queue();
      const { job: parent } = await wq.enqueue(q, { id: `${q}-parent`, name: "parent" });
      await wq.enqueue(q, { id: `${q}-job`, name: "job" });
      if (!hasJobEditing(wq)) throw new Error("workerqueue-sql declares editing");
      const replaced = await wq.replace(q, `${q}-job`, { name: "job again", dependsOn: [parent.id] });
      expect(replaced.state).toBe("blocked");
      await wq.reserve(q, { worker: "w" });
      await wq.complete(q, parent.id, { worker: "w" });
      expect((await wq.get(q, `${q}-job`))?.state).toBe("waiting");
    });
  });
}
