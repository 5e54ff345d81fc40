import type { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COMPLETION_MODES, STATE_FIELDS, createCloudqBackend } from "../src/index.js";
import { mongoUrl, rawClient, rawFilter, testDatabase } from "./helpers.js";

const database = testDatabase("modes");
let client: MongoClient;
const jobs = () => client.db(database).collection("cloudq.jobs");
const queue = () => `mode-${Math.random().toString(36).slice(2, 10)}`;

beforeAll(async () => {
  client = await rawClient();
});
afterAll(async () => {
  await client.close();
});

// Every pairing of state field and completion mode, not only the two the legacy servers used.
for (const stateField of STATE_FIELDS) {
  for (const completion of COMPLETION_MODES) {
    describe(`cloudq-mongo basics with ${stateField} and ${completion}`, () => {
      it("publish writes queued, reserve writes reserved, complete removes or marks deleted, all in the chosen state field", async () => {
        const backend = createCloudqBackend({ url: mongoUrl(), database, stateField, completion });
        try {
          await backend.ready();
          const q = queue();
          const { job } = await backend.enqueue(q, { name: "Basic", data: [1, 2] });
          const other = stateField === "queue_state" ? "workflow_state" : "queue_state";
          const published = await jobs().findOne(rawFilter(q, job.id));
          expect(published?.[stateField]).toBe("queued");
          expect(published).not.toHaveProperty(other);
          const [reserved] = await backend.reserve(q, { worker: "w" });
          expect(reserved).toMatchObject({ id: job.id, state: "active", attempts: 1 });
          expect((await jobs().findOne(rawFilter(q, job.id)))?.[stateField]).toBe("reserved");
          const done = await backend.complete(q, job.id, { worker: "w", result: { rows: 3 } });
          const after = await jobs().findOne(rawFilter(q, job.id));
          // A removed document keeps no result, and the answer does not pretend otherwise.
          if (completion === "remove") expect([after, done.result]).toEqual([null, null]);
          else expect([after?.[stateField], done.result]).toEqual(["deleted", { rows: 3 }]);
          expect(await backend.reserve(q, { worker: "w" })).toEqual([]);
        } finally {
          await backend.close();
        }
      });
    });
  }
}

describe("cloudq-mongo options", () => {
  it("the database defaults to the one the URL names, else cloudq; an explicit option wins", async () => {
    const named = `${testDatabase("url")}`;
    const url = mongoUrl().replace(/\/?(\?.*)?$/, `/${named}$1`);
    const fromUrl = createCloudqBackend({ url });
    try {
      await fromUrl.enqueue("q", { name: "x", data: [] });
      expect(await client.db(named).collection("cloudq.jobs").countDocuments({ queue: "q" })).toBe(1);
    } finally {
      await fromUrl.close();
    }
  });

  it("an unknown option or both url and client are a ValidationError before any connection", () => {
    expect(() => createCloudqBackend({ url: mongoUrl(), databse: "typo" } as never)).toThrow(
      expect.objectContaining({ code: "VALIDATION" }),
    );
    expect(() => createCloudqBackend({ url: mongoUrl(), client } as never)).toThrow(expect.objectContaining({ code: "VALIDATION" }));
    expect(() => createCloudqBackend({ url: mongoUrl(), stateField: "state" } as never)).toThrow(
      expect.objectContaining({ code: "VALIDATION" }),
    );
  });

  it("an injected client is used and left open by close()", async () => {
    const backend = createCloudqBackend({ client, database });
    await backend.enqueue("injected", { name: "x", data: [] });
    await backend.close();
    expect(await jobs().countDocuments({ queue: "injected" })).toBeGreaterThanOrEqual(1);
  });
});
