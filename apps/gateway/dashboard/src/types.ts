/** The shapes the /v1 API answers, as far as the dashboard reads them. */

export const STATES = ["waiting", "delayed", "active", "completed", "failed", "canceled", "blocked"] as const;
export type JobState = (typeof STATES)[number];
export type Counts = Record<JobState, number>;
export type Access = "metrics" | "read" | "write" | "admin";

export interface WhoAmI {
  authEnabled: boolean;
  name: string | null;
  access: Access;
  doors: string[] | null;
  queues: string[] | null;
}

export interface Actions {
  retry: boolean;
  promote: boolean;
  priority: boolean;
}

export interface QueueSummary {
  name: string;
  backend: string;
  type: string;
  paused: boolean | null;
  counts: Counts;
  error?: string;
}

export interface Overview {
  backends: Array<{ name: string; type: string; actions: Actions; error?: string }>;
  queues: QueueSummary[];
}

export interface Job {
  id: string;
  queue: string;
  name: string;
  data: unknown;
  state: JobState;
  priority: number;
  runAt: number | null;
  attempts: number;
  maxAttempts: number;
  backoff: { type: string; delay: number } | null;
  lease: { worker: string; expiresAt: number } | null;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  result: unknown;
  error: { group?: string; message: string } | null;
  progress: unknown;
  tags: string[];
  dependsOn: string[];
  uniqueKey: string | null;
  native: Record<string, unknown>;
}

export interface JobEvent {
  /** Opaque: only handed back to resume the stream. */
  id: string;
  type: string;
  backend: string;
  queue: string;
  jobId?: string;
  time: number;
}

export interface Minute {
  at: number;
  completed: number;
  failed: number;
}

export interface MigrationRun {
  id: string;
  kind: "migrate" | "bridge";
  from: string;
  to: string;
  state: "running" | "finished" | "failed" | "stopped";
  startedAt: number;
  finishedAt?: number;
  copied: number;
  total: number | null;
  error?: string;
  queues: Array<{ queue: string; state: string; copied: number; total: number | null }>;
}

const RANK: Record<Access, number> = { metrics: 0, read: 1, write: 2, admin: 3 };
export const atLeast = (who: WhoAmI | null, access: Access) => who !== null && RANK[who.access] >= RANK[access];
