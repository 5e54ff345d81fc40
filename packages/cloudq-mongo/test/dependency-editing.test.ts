import { type Backend, type DependencyEditing, hasDependencyEditing, hasDependentsLookup } from "@switchyard/core";
import { ObjectId } from "mongodb";
import { afterAll, describe, expect, it } from "vitest";
import { type CloudqBackendOptions, createCloudqBackend } from "../src/index.js";
import { mongoUrl, rawFilter, useCloudqDatabase } from "./helpers.js";

/**
 * DependencyEditing on the Cloudq layout (src/dependency-editing.ts): a blocked job's parents
 * changed after enqueue, read in `cloudq.jobs` with the driver as well as through the Backend, what
 * legacy workers then take, and that a parent completing while its child's parents change never
 * leaves the child blocked.
 */
const { database, backend, jobs, queue } = useCloudqDatabase("depedit", "dep");
const opened: Backend[] = [];
afterAll(async () => {
  for (const other of opened) await other.close();
});

/** Another backend on the same database, on its own connection pool. */
async function open(options: Partial<CloudqBackendOptions> = {}): Promise<Backend & DependencyEditing> {
  const other = createCloudqBackend({ url: mongoUrl(), database, ...options } as CloudqBackendOptions);
  await other.ready();
  opened.push(other);
  return other;
}

const raw = (q: string, id: string) => jobs().findOne(rawFilter(q, id));

/** node-cloudq 0.2's reserve: the oldest `queued` document of the queue, whatever Switchyard keeps beside it. */
async function legacyReserve(q: string): Promise<string | null> {
  const taken = await jobs().findOneAndUpdate(
    { queue: q, queue_state: "queued" },
    { $set: { queue_state: "reserved", updated_at: new Date() } },
    { sort: { inserted_at: 1 }, returnDocument: "after" },
  );
  return taken ? (taken._id as ObjectId).toHexString() : null;
}

/**
 * `operation` started 0 to 9 ms after the one it races, by round: an edit takes a few commands, so
 * the rounds spread the racing completion over each step of it rather than always before the first.
 */
async function later<T>(round: number, operation: () => Promise<T>): Promise<T> {
  await new Promise((resolve) => setTimeout(resolve, round % 10));
  return operation();
}

/** Reserves and completes `ids` (in enqueue order) through `through`. */
async function run(through: Backend, q: string, ...ids: string[]): Promise<void> {
  const taken = await through.reserve(q, { worker: "w", count: ids.length });
  expect(taken.map((job) => job.id)).toEqual(ids);
  for (const id of ids) await through.complete(q, id, { worker: "w" });
}

describe("cloudq-mongo: DependencyEditing", () => {
  it("is declared, so the qless door's depends on/off reaches it", () => {
    expect(hasDependencyEditing(backend())).toBe(true);
  });

  it("addDependencies: the job also waits for the added parent, listed in switchyard.dependsOn, still 'blocked' to legacy workers", async () => {
    const q = queue();
    const { job: first } = await backend().enqueue(q, { name: "first" });
    const { job: second } = await backend().enqueue(q, { name: "second" });
    const { job: child } = await backend().enqueue(q, { name: "child", dependsOn: [first.id] });
    const added = await backend().addDependencies(q, child.id, [second.id, second.id]);
    expect(added).toMatchObject({ id: child.id, state: "blocked", dependsOn: [first.id, second.id] });
    expect(await raw(q, child.id)).toMatchObject({ queue_state: "blocked", switchyard: { dependsOn: [first.id, second.id] } });
    const lookup = backend();
    if (!hasDependentsLookup(lookup)) throw new Error("cloudq-mongo declares DependentsLookup");
    expect(await lookup.dependentsOf(q, [second.id])).toEqual(new Map([[second.id, [child.id]]]));
    await run(backend(), q, first.id);
    expect((await raw(q, child.id))?.queue_state).toBe("blocked");
    expect(await legacyReserve(q)).toBe(second.id);
    expect(await legacyReserve(q)).toBeNull();
  });

  it("addDependencies: the added parent's completion is what releases the job, as queue_state 'queued' legacy workers take", async () => {
    const q = queue();
    const { job: first } = await backend().enqueue(q, { name: "first" });
    const { job: second } = await backend().enqueue(q, { name: "second" });
    const { job: child } = await backend().enqueue(q, { name: "child", dependsOn: [first.id] });
    await backend().addDependencies(q, child.id, [second.id]);
    await run(backend(), q, first.id);
    expect((await backend().get(q, child.id))?.state).toBe("blocked");
    await run(backend(), q, second.id);
    expect((await raw(q, child.id))?.queue_state).toBe("queued");
    expect(await legacyReserve(q)).toBe(child.id);
  });

  it("a completed or missing parent is not waited for, nor kept in the list", async () => {
    const keeping = await open({ completion: "mark-deleted" });
    const q = queue();
    const { job: done } = await keeping.enqueue(q, { name: "done" });
    await run(keeping, q, done.id);
    expect((await raw(q, done.id))?.queue_state).toBe("deleted");
    const { job: first } = await keeping.enqueue(q, { name: "first" });
    const { job: child } = await keeping.enqueue(q, { name: "child", dependsOn: [first.id] });
    const missing = new ObjectId().toHexString();
    const added = await keeping.addDependencies(q, child.id, [done.id, missing, "never-enqueued"]);
    expect(added).toMatchObject({ state: "blocked", dependsOn: [first.id] });
    expect((await raw(q, child.id))?.switchyard).toMatchObject({ dependsOn: [first.id] });
  });

  it("removeDependencies: the job no longer waits for a removed parent, and keeps waiting for the others", async () => {
    const q = queue();
    const { job: first } = await backend().enqueue(q, { name: "first" });
    const { job: second } = await backend().enqueue(q, { name: "second" });
    const { job: child } = await backend().enqueue(q, { name: "child", dependsOn: [first.id, second.id] });
    expect(await backend().removeDependencies(q, child.id, [first.id, "not-a-parent"])).toMatchObject({
      state: "blocked",
      dependsOn: [second.id],
    });
    expect(await raw(q, child.id)).toMatchObject({ queue_state: "blocked", switchyard: { dependsOn: [second.id] } });
    await run(backend(), q, first.id);
    expect((await backend().get(q, child.id))?.state).toBe("blocked");
    await run(backend(), q, second.id);
    expect((await backend().get(q, child.id))?.state).toBe("waiting");
  });

  it('removeDependencies "all": the job is queued at once, its delay and parents dropped, and a legacy worker takes it', async () => {
    const q = queue();
    const { job: first } = await backend().enqueue(q, { name: "first" });
    const { job: child } = await backend().enqueue(q, { name: "child", dependsOn: [first.id], delay: 60_000 });
    expect((await raw(q, child.id))?.switchyard).toHaveProperty("runAt");
    const released = await backend().removeDependencies(q, child.id, "all");
    expect(released).toMatchObject({ id: child.id, state: "waiting", runAt: null, dependsOn: [] });
    const document = await raw(q, child.id);
    expect(document?.queue_state).toBe("queued");
    expect(document?.switchyard).not.toHaveProperty("runAt");
    expect(document?.switchyard).not.toHaveProperty("dependsOn");
    expect(document?.updated_at).toBeInstanceOf(Date);
    expect(await legacyReserve(q)).toBe(first.id);
    expect(await legacyReserve(q)).toBe(child.id);
  });

  it("removing a parent leaves the job released when the others were finished by a legacy server, which releases nothing", async () => {
    const q = queue();
    const { job: first } = await backend().enqueue(q, { name: "first" });
    const { job: second } = await backend().enqueue(q, { name: "second" });
    const { job: child } = await backend().enqueue(q, { name: "child", dependsOn: [first.id, second.id] });
    // node-cloudq 0.0.5+'s DELETE.
    await jobs().deleteOne({ _id: new ObjectId(first.id) });
    expect((await raw(q, child.id))?.queue_state).toBe("blocked");
    expect(await backend().removeDependencies(q, child.id, [second.id])).toMatchObject({ state: "waiting", dependsOn: [] });
    expect((await raw(q, child.id))?.queue_state).toBe("queued");
  });

  it("a job these release comes before the candidates a pooled backend already read", async () => {
    const pooled = await open({ candidateTtlMs: 60_000 });
    const q = queue();
    const { job: parent } = await pooled.enqueue(q, { name: "parent" });
    const { job: child } = await pooled.enqueue(q, { name: "child", priority: 5, dependsOn: [parent.id] });
    await pooled.enqueue(q, { name: "other" });
    expect((await pooled.reserve(q, { worker: "w" }))[0]?.id).toBe(parent.id);
    await pooled.removeDependencies(q, child.id, "all");
    expect((await pooled.reserve(q, { worker: "w" }))[0]?.id).toBe(child.id);
  });

  it("a job that is not blocked is refused with INVALID_STATE and left as it was; an unknown one with NOT_FOUND", async () => {
    const q = queue();
    const { job: waiting } = await backend().enqueue(q, { name: "waiting" });
    const { job: other } = await backend().enqueue(q, { name: "other" });
    const before = await raw(q, waiting.id);
    await expect(backend().addDependencies(q, waiting.id, [other.id])).rejects.toMatchObject({ code: "INVALID_STATE" });
    await expect(backend().removeDependencies(q, waiting.id, "all")).rejects.toMatchObject({ code: "INVALID_STATE" });
    expect(await raw(q, waiting.id)).toEqual(before);
    await run(backend(), q, waiting.id, other.id);
    const { job: child } = await backend().enqueue(q, { name: "child", dependsOn: [waiting.id] });
    expect(child.state).toBe("waiting");
    await expect(backend().addDependencies(q, child.id, [other.id])).rejects.toMatchObject({ code: "INVALID_STATE" });
    await expect(backend().addDependencies(q, new ObjectId().toHexString(), [other.id])).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(backend().removeDependencies(q, "no-such-job", "all")).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(backend().addDependencies(q, child.id, "all" as never)).rejects.toMatchObject({ code: "VALIDATION" });
  });

  it("addDependencies racing the added parent's completion leaves the job released once every parent completed (20 rounds)", async () => {
    const editor = await open();
    const worker = await open();
    const q = queue();
    for (let round = 0; round < 20; round++) {
      // The child's one parent was finished by a legacy DELETE, so only the racing parent can hold it.
      const { job: gone } = await worker.enqueue(q, { name: `gone-${round}` });
      const { job: child } = await worker.enqueue(q, { name: `child-${round}`, dependsOn: [gone.id] });
      await jobs().deleteOne({ _id: new ObjectId(gone.id) });
      const { job: parent } = await worker.enqueue(q, { name: `parent-${round}` });
      expect((await worker.reserve(q, { worker: "w" }))[0]?.id, `round ${round}`).toBe(parent.id);
      const [added] = await Promise.all([
        editor.addDependencies(q, child.id, [parent.id]),
        later(round, () => worker.complete(q, parent.id, { worker: "w" })),
      ]);
      expect(["blocked", "waiting"]).toContain(added.state);
      expect((await raw(q, child.id))?.queue_state, `round ${round}`).toBe("queued");
      await run(worker, q, child.id);
    }
    expect(await jobs().countDocuments({ queue: q })).toBe(0);
  }, 60_000);

  it("a release checked against the old parents never lands once an edit added an unfinished one (20 rounds)", async () => {
    const editor = await open();
    const worker = await open();
    const q = queue();
    for (let round = 0; round < 20; round++) {
      const { job: gate } = await worker.enqueue(q, { name: `gate-${round}` });
      const { job: child } = await worker.enqueue(q, { name: `child-${round}`, dependsOn: [gate.id] });
      const { job: pending } = await worker.enqueue(q, { name: `pending-${round}`, priority: -1 });
      expect((await worker.reserve(q, { worker: "w" }))[0]?.id, `round ${round}`).toBe(gate.id);
      const [added] = await Promise.allSettled([
        editor.addDependencies(q, child.id, [pending.id]),
        later(round, () => worker.complete(q, gate.id, { worker: "w" })),
      ]);
      const state = (await raw(q, child.id))?.queue_state;
      if (added.status === "fulfilled") {
        // The edit came first: the child waits for the parent it added, whenever the gate completed.
        expect(added.value.state, `round ${round}`).toBe("blocked");
        expect(state, `round ${round}`).toBe("blocked");
        await run(worker, q, pending.id);
        expect((await raw(q, child.id))?.queue_state, `round ${round}`).toBe("queued");
        await run(worker, q, child.id);
      } else {
        // The release came first: the edit is refused, as for any job that is not blocked.
        expect(added.reason, `round ${round}`).toMatchObject({ code: "INVALID_STATE" });
        expect(state, `round ${round}`).toBe("queued");
        await run(worker, q, child.id, pending.id);
      }
    }
    expect(await jobs().countDocuments({ queue: q })).toBe(0);
  }, 60_000);
});
