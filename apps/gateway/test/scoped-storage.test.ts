import { AsyncResource } from "node:async_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScopedStorage } from "../src/scoped-storage.js";
import { type TestGateway, openTestGateway } from "./helpers.js";

/**
 * An enabled AsyncLocalStorage on Node 20 hooks every promise and async resource the process makes
 * from then on: its hook tags each new resource with the storage's value (a symbol-keyed property).
 * Counting those tags on a fresh resource shows which storages are enabled now.
 */
const tagsOnNewResource = () => Object.getOwnPropertySymbols(new AsyncResource("probe")).length;

describe("ScopedStorage: an AsyncLocalStorage enabled only while a run is in flight", () => {
  it("each run sees its own value, the hook stays while any run is in flight, and is gone once all have settled", async () => {
    const storage = new ScopedStorage<number>();
    const idle = tagsOnNewResource();
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = storage.run(1, async () => {
      await gate;
      return [storage.getStore(), await storage.run(3, async () => storage.getStore()), storage.getStore()];
    });
    expect(await storage.run(2, async () => storage.getStore())).toBe(2);
    // The slow run is still in flight: its storage stays enabled, outside any run it holds no value.
    expect(tagsOnNewResource()).toBe(idle + 1);
    expect(storage.getStore()).toBeUndefined();
    release();
    expect(await slow).toEqual([1, 3, 1]);
    expect(tagsOnNewResource()).toBe(idle);
  });

  it("a run that fails still settles its count: the hook is gone after it", async () => {
    const storage = new ScopedStorage<string>();
    const idle = tagsOnNewResource();
    await expect(storage.run("x", async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(tagsOnNewResource()).toBe(idle);
  });
});

describe("the qless doors' translated commands leave no promise hook behind", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await openTestGateway();
  });
  afterAll(() => t?.cleanup());

  it("after qless commands at the caller's clock on a SQLite store, a new async resource carries no storage's tag", async () => {
    const idle = tagsOnNewResource();
    for (const [command, args] of [
      ["put", ["client", "hooks", "h1", "Klass", "{}", 0]],
      ["pop", ["hooks", "w1", 1]],
      ["complete", ["h1", "w1", "hooks", "{}"]],
    ] as const) {
      const res = await t.request("POST", `/qless/${command}`, { now: 100, queue: "hooks", args });
      expect(res.status, JSON.stringify(res.json)).toBe(200);
    }
    expect((await t.request("POST", "/qless/get", { now: 101, queue: "hooks", args: ["h1"] })).json.reply.state).toBe("complete");
    expect(tagsOnNewResource()).toBe(idle);
  });
});
