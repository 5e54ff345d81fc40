// What @switchyard/conformance (and any test of a store shared with the Cloudq servers) reads natively.
import type { Probe } from "@switchyard/core";
import { type MongoClient, ObjectId } from "mongodb";
import type { CompletionMode, StateField } from "./options.js";

/** Finds the raw document of a job id the way the legacy servers address it (by `_id`), or by `switchyard.id`. */
export function rawFilter(queue: string, id: string): Record<string, unknown> {
  return /^[0-9a-f]{24}$/.test(id) ? { queue, _id: new ObjectId(id) } : { queue, "switchyard.id": id };
}

/** The conformance probe: findOne/countDocuments on `cloudq.jobs`, never through the adapter. */
export function cloudqProbe(client: () => MongoClient, database: string, stateField: StateField, completion: CompletionMode): Probe {
  const jobs = () => client().db(database).collection("cloudq.jobs");
  return {
    async nativeState(queue, id) {
      const document = await jobs().findOne(rawFilter(queue, id));
      if (!document) return null;
      const state = document[stateField];
      return typeof state === "string" ? state : null;
    },
    countJobs: (queue) => jobs().countDocuments({ queue }),
    expectedStates: {
      waiting: ["queued"],
      delayed: ["queued"],
      active: ["reserved"],
      completed: completion === "remove" ? [null] : ["deleted"],
      failed: ["failed"],
      canceled: ["canceled"],
      blocked: ["blocked"],
    },
  };
}
