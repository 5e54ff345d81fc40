import { runConformance } from "@switchyard/conformance";
import { MongoClient } from "mongodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CompletionMode, type StateField, capabilitiesFor, createCloudqBackend } from "../src/index.js";
import { cloudqProbe, mongoUrl, rawClient, testDatabase } from "./helpers.js";

// Each run uses fresh databases on a throwaway server; they are left for the server's temporary
// directory to take away rather than dropped while other files may still be using the server.
let client: MongoClient | undefined;
beforeAll(async () => {
  client = await rawClient();
});
afterAll(async () => {
  await client?.close();
});

const connected = () => {
  if (!client) throw new Error("probe used before beforeAll connected");
  return client;
};

// node-cloudq 0.2's layout (queue_state, DELETE removes) and the Ruby server's (workflow_state,
// DELETE marks the document deleted): the whole contract holds in both.
const MODES: Array<{ stateField: StateField; completion: CompletionMode }> = [
  { stateField: "queue_state", completion: "remove" },
  { stateField: "workflow_state", completion: "mark-deleted" },
];

for (const { stateField, completion } of MODES) {
  const database = testDatabase("conf");
  runConformance({
    name: `cloudq-mongo (${stateField}, ${completion})`,
    createUnreachableBackend: () =>
      createCloudqBackend({ url: "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300", database, stateField, completion }),
    createBackend: async () => {
      const backend = createCloudqBackend({ url: mongoUrl(), database, stateField, completion });
      await backend.ready();
      return backend;
    },
    probe: cloudqProbe(connected, database, stateField, completion),
    capabilities: capabilitiesFor({ completion }),
  });
}

// In this file rather than beside the layout tests so that it runs after the conformance suites
// instead of beside them: on FerretDB every reserve is a scan of the collection, and two 1,000-job
// races at once on one server only measure how the machine copes.
const raceDatabase = testDatabase("race");
describe("cloudq-mongo: concurrency", () => {
  it("10 concurrent reservers on 1,000 jobs: each job is reserved exactly once", async () => {
    const q = `race-${Math.random().toString(36).slice(2, 10)}`;
    const reservers = await Promise.all(
      Array.from({ length: 10 }, async () => {
        const reserver = createCloudqBackend({ url: mongoUrl(), database: raceDatabase });
        await reserver.ready();
        return reserver;
      }),
    );
    try {
      for (let start = 0; start < 1000; start += 250) {
        await reservers[0]!.enqueueBulk(
          q,
          Array.from({ length: 250 }, (_, i) => ({ name: "race", data: [start + i] })),
        );
      }
      const handedOut: string[] = [];
      await Promise.all(
        reservers.map(async (reserver, index) => {
          for (;;) {
            const got = await reserver.reserve(q, { worker: `r${index}`, count: 5, leaseMs: 300_000 });
            if (got.length === 0) return;
            handedOut.push(...got.map((job) => job.id));
          }
        }),
      );
      expect(handedOut).toHaveLength(1000);
      expect(new Set(handedOut).size).toBe(1000);
      expect(
        await connected()
          .db(raceDatabase)
          .collection("cloudq.jobs")
          .countDocuments({ queue: q, queue_state: "reserved", "switchyard.attempts": 1 }),
      ).toBe(1000);
    } finally {
      await Promise.all(reservers.map((reserver) => reserver.close()));
    }
  }, 300_000);

  it("50 concurrent reserves of one backend on 100 jobs: each job once, each reserve passing by what another went for (about one token a job)", async () => {
    const q = `local-${Math.random().toString(36).slice(2, 10)}`;
    const monitored = new MongoClient(mongoUrl(), { monitorCommands: true });
    let tokensTried = 0;
    monitored.on("commandStarted", (event) => {
      const command = event.command as { insert?: string; documents?: unknown[] };
      if (command.insert === "cloudq.claims") tokensTried += command.documents?.length ?? 0;
    });
    const backend = createCloudqBackend({ client: monitored, database: raceDatabase });
    try {
      await backend.enqueueBulk(
        q,
        Array.from({ length: 100 }, (_, i) => ({ name: "local", data: [i] })),
      );
      const handedOut: string[] = [];
      await Promise.all(
        Array.from({ length: 50 }, async (_, index) => {
          for (;;) {
            const got = await backend.reserve(q, { worker: `l${index}`, leaseMs: 300_000 });
            if (got.length === 0) return;
            handedOut.push(...got.map((job) => job.id));
          }
        }),
      );
      expect(handedOut).toHaveLength(100);
      expect(new Set(handedOut).size).toBe(100);
      // Racing one another for the head of the queue, the 50 took 20 tokens or more per job.
      expect(tokensTried).toBeLessThanOrEqual(200);
    } finally {
      await backend.close();
      await monitored.close();
    }
  }, 300_000);
});
