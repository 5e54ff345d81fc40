import type { Job } from "../types.js";

export interface HistoryEntry {
  at: number;
  what: string;
  detail?: string;
}

const record = (value: unknown): Record<string, unknown> | null =>
  value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : null;

/**
 * What happened to the job, oldest first: qless keeps a history of its own (`native.qless.history`,
 * times in seconds), which is shown as it is; for every other store it is told from the job's times.
 */
export function historyOf(job: Job): HistoryEntry[] {
  const qless = record(job.native.qless);
  if (Array.isArray(qless?.history) && qless.history.length > 0) {
    return qless.history
      .map(record)
      .filter((entry): entry is Record<string, unknown> => entry !== null && typeof entry.when === "number")
      .map(({ when, what, ...rest }) => {
        const detail = Object.entries(rest)
          .map(([key, value]) => `${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`)
          .join(", ");
        return { at: (when as number) * 1000, what: String(what), ...(detail ? { detail } : {}) };
      });
  }
  const entries: HistoryEntry[] = [{ at: job.createdAt, what: "enqueued" }];
  if (job.runAt !== null && job.state === "delayed") entries.push({ at: job.runAt, what: "due" });
  if (job.startedAt !== null) entries.push({ at: job.startedAt, what: "started", detail: `attempt ${job.attempts}` });
  if (job.finishedAt !== null) {
    const detail = job.state === "failed" && job.error ? job.error.message.split("\n")[0] : undefined;
    entries.push({ at: job.finishedAt, what: job.state, ...(detail ? { detail } : {}) });
  }
  return entries.sort((a, b) => a.at - b.at);
}

/** A stack trace the store kept apart from the message (glide-mq's `stacktrace`), if any. */
export function stackOf(job: Job): string | null {
  const glide = record(job.native.glide);
  const fields = record(glide?.fields);
  const raw = fields?.stacktrace ?? job.native.stacktrace ?? job.native.stack;
  if (typeof raw !== "string" || raw === "" || raw === "[]") return null;
  try {
    const parsed = JSON.parse(raw) as unknown;
    if (Array.isArray(parsed)) return parsed.map(String).join("\n\n") || null;
  } catch {
    // Plain text: shown as it is.
  }
  return raw;
}
