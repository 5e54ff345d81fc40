import { runConformance } from "@switchyard/conformance";
import type { MongoClient } from "mongodb";
import { afterAll, beforeAll } from "vitest";
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
    createBackend: async () => {
      const backend = createCloudqBackend({ url: mongoUrl(), database, stateField, completion });
      await backend.ready();
      return backend;
    },
    probe: cloudqProbe(connected, database, stateField, completion),
    capabilities: capabilitiesFor({ completion }),
  });
}
