// What @switchyard/conformance (and any test of a table shared with the legacy daemons) reads natively.
import type { Probe } from "@switchyard/core";
import type { Knex } from "knex";
import type { Dialect } from "./options.js";

/** The dialect's cast of the integer `id` to text, to compare it with a job id. */
function idText(dialect: Dialect): string {
  return dialect === "postgres" ? "cast(id as varchar)" : dialect === "mysql" ? "cast(id as char)" : "cast(id as text)";
}

/** The conformance probe: a plain select on the `jobs` table, the `status` column as the legacy daemons read it. */
export function workerQueueProbe(knex: Knex, table: string, dialect: Dialect): Probe {
  const rowsOf = (queue: string) => knex(table).whereRaw("coalesce(sy_queue, 'default') = ?", [queue]);
  return {
    async nativeState(queue, id) {
      const row = await rowsOf(queue)
        .select("status")
        .where((q) => q.where("sy_job_id", id).orWhere((q2) => q2.whereNull("sy_job_id").whereRaw(`${idText(dialect)} = ?`, [id])))
        .first();
      return row ? String(row.status) : null;
    },
    async countJobs(queue) {
      const [row] = await rowsOf(queue).count({ n: "*" });
      return Number(row?.n ?? 0);
    },
    expectedStates: {
      waiting: ["pending"],
      delayed: ["pending"],
      active: ["loading", "processing"],
      completed: ["complete"],
      failed: ["error"],
      canceled: ["error"],
      // Pending with the blocked marker in locked_queue_id, which the legacy claim never takes.
      blocked: ["pending"],
    },
  };
}
