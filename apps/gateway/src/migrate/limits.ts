import { type Backend, type Job, type JobState, forEachPage, hasRecurringJobs } from "@switchyard/core";

/** A kind of job a target store cannot keep, and the capability it lacks. */
const LIMITS: Array<{ what: string; capability: keyof Backend["capabilities"]; has: (job: Job) => boolean }> = [
  { what: "jobs with tags", capability: "tags", has: (job) => job.tags.length > 0 },
  { what: "jobs with dependencies", capability: "dependencies", has: (job) => job.dependsOn.length > 0 },
  { what: "delayed jobs", capability: "delays", has: (job) => job.state === "delayed" },
  { what: "jobs with a priority", capability: "priorities", has: (job) => job.priority !== 0 },
  { what: "jobs with a unique key", capability: "uniqueKeys", has: (job) => job.uniqueKey !== null },
  { what: "jobs with a result", capability: "results", has: (job) => job.result !== null },
  { what: "completed jobs (the target removes them)", capability: "keepsCompleted", has: (job) => job.state === "completed" },
];

/**
 * What the source queue holds that the target cannot keep, by its declared capabilities: counts per
 * kind, read page by page without writing. The import refuses such jobs (or drops what the capability
 * names) with the reason; this says so before anything is written.
 */
export async function whatTheTargetCannotHold(
  from: Backend,
  to: Backend,
  queue: string,
  states: readonly JobState[] | undefined,
): Promise<Record<string, number>> {
  const lacking = LIMITS.filter((limit) => !to.capabilities[limit.capability]);
  const found: Record<string, number> = {};
  // Recurring jobs' definitions are not jobs: a target without a place for them stops the migration.
  const recurring = hasRecurringJobs(from) && !hasRecurringJobs(to) ? (await from.recurrences(queue)).length : 0;
  if (recurring > 0) found["recurring jobs (RecurringJobs)"] = recurring;
  if (lacking.length === 0) return found;
  await forEachPage(from, queue, (jobs) => {
    for (const job of jobs) {
      if (states && !states.includes(job.state)) continue;
      for (const limit of lacking) {
        const kind = `${limit.what} (${limit.capability})`;
        if (limit.has(job)) found[kind] = (found[kind] ?? 0) + 1;
      }
    }
  });
  return found;
}
