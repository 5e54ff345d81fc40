import type { Backend } from "./backend.js";
import type { EnqueueInput, Job, Json } from "./job.js";

/**
 * Optional interfaces: what only some systems have. A door that needs one discovers it on the
 * backend with its guard and answers 501 with the reason when it is absent; no door imports an
 * adapter package.
 */

/** A reply of a qless command as Redis returns it: bulk strings, integers, nil, and lists of those. */
export type QlessReply = string | number | null | QlessReply[];

/** A qless command refused by qless's own rules; the message is qless's, for a qless client to show. */
export class QlessCommandError extends Error {
  readonly command: string;
  constructor(command: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "QlessCommandError";
    this.command = command;
  }
}

/**
 * qless's command API, run verbatim (`put`, `pop`, `heartbeat`, `complete`... with qless's
 * argument order), as on a store that holds the qless layout. A qless refusal rejects with
 * QlessCommandError; a store failure with the core's typed errors.
 */
export interface QlessCommands {
  qless(command: string, now: number | string, ...args: Array<string | number>): Promise<QlessReply>;
}

export function hasQlessCommands(backend: Backend): backend is Backend & QlessCommands {
  return typeof (backend as Partial<QlessCommands>).qless === "function";
}

/**
 * The blocked jobs found from the jobs they wait for: what qless shows as a job's `dependents`. A
 * store that keeps the link on the waiting job only (a Worker Queue row's `sy_depends_on`) answers
 * from its own index of blocked jobs, never by reading the whole queue.
 */
export interface DependentsLookup {
  /** For each of `ids`, the blocked jobs of `queue` that wait for it, in enqueue order; an id none waits for is left out. */
  dependentsOf(queue: string, ids: string[]): Promise<Map<string, string[]>>;
}

export function hasDependentsLookup(backend: Backend): backend is Backend & DependentsLookup {
  return typeof (backend as Partial<DependentsLookup>).dependentsOf === "function";
}

/**
 * Changing what a blocked job waits for after its enqueue, as qless's `depends on` and `depends off`
 * do. A job that is not blocked is an InvalidStateError.
 */
export interface DependencyEditing {
  /** The job also waits for these jobs of its queue; a missing or completed one is not waited for, as qless ignores it. */
  addDependencies(queue: string, id: string, parents: string[]): Promise<Job>;
  /**
   * The job no longer waits for these (for any, given "all"); once it waits for no unfinished job it
   * is waiting at once, its delay dropped, as qless's `depends off` puts it in the work queue.
   */
  removeDependencies(queue: string, id: string, parents: string[] | "all"): Promise<Job>;
}

export function hasDependencyEditing(backend: Backend): backend is Backend & DependencyEditing {
  const editing = backend as Partial<DependencyEditing>;
  return typeof editing.addDependencies === "function" && typeof editing.removeDependencies === "function";
}

/**
 * Changing a job after it was enqueued, where the store can: what qless's `priority`, `tag add`/
 * `tag remove` and a re-`put` of an existing jid do. A missing job is a NotFoundError.
 */
export interface JobEditing {
  /** Sets the priority (the core scale); a waiting job takes its new place in the claim order. */
  setPriority(queue: string, id: string, priority: number): Promise<Job>;
  /** Replaces the job's tags. */
  setTags(queue: string, id: string, tags: string[]): Promise<Job>;
  /**
   * Puts the job with this id in `queue` again as new, as qless re-puts a jid: name, data and
   * options from `input`, waiting (or delayed), no lease, result, error or attempts; whatever state
   * it was in, a worker holding it loses its lease.
   */
  replace(queue: string, id: string, input: EnqueueInput): Promise<Job>;
}

export function hasJobEditing(backend: Backend): backend is Backend & JobEditing {
  const editing = backend as Partial<JobEditing>;
  return typeof editing.setPriority === "function" && typeof editing.setTags === "function" && typeof editing.replace === "function";
}

/**
 * Replacing a job's data in place, in any state and without changing anything else: qless's
 * `complete`, `heartbeat` and `fail` write the data their worker sends onto the job.
 */
export interface JobDataEditing {
  setData(queue: string, id: string, data: Json): Promise<Job>;
}

export function hasJobDataEditing(backend: Backend): backend is Backend & JobDataEditing {
  return typeof (backend as Partial<JobDataEditing>).setData === "function";
}

/**
 * Giving a reserved job back without spending its run: the lease ends at once, so the next reserve
 * hands the job out again ahead of waiting jobs, and its attempts drop by one, so that run neither
 * counts towards maxAttempts nor exhausts the job when it is handed out again. qless's `timeout`
 * takes a job from its worker this way (its retries are spent only by a lock that runs out).
 * Refused with LeaseLostError when `worker` no longer holds the job.
 */
export interface RunRelease {
  release(queue: string, id: string, options: { worker: string }): Promise<Job>;
}

export function hasRunRelease(backend: Backend): backend is Backend & RunRelease {
  return typeof (backend as Partial<RunRelease>).release === "function";
}

/**
 * Finding a job by its id alone, on a store whose ids are per queue: what qless's global jids need
 * (a put of a jid another queue holds moves that job). Without it a door asks every queue.
 */
export interface JobLookup {
  /** The queues that hold a job under `id`, in any state, in name order: one read, whatever the number of queues. */
  queuesHolding(id: string): Promise<string[]>;
}

export function hasJobLookup(backend: Backend): backend is Backend & JobLookup {
  return typeof (backend as Partial<JobLookup>).queuesHolding === "function";
}

/** The queues to look in for a job known by its id alone: those JobLookup names, else every queue. */
export async function queuesToSearch(backend: Backend, id: string): Promise<string[]> {
  return hasJobLookup(backend) ? backend.queuesHolding(id) : backend.queues();
}

/** An entry of glide-mq's events stream: its stream id, the `event` field, and the other fields. */
export interface GlideMqEvent {
  id: string;
  event: string;
  fields: Record<string, string>;
}

/** glide-mq's five counts, as its `Queue.getJobCounts()` computes them (prioritized jobs count as delayed). */
export interface GlideMqCounts {
  waiting: number;
  active: number;
  delayed: number;
  completed: number;
  failed: number;
}

/** A queue's global rate limit in glide-mq: at most `max` jobs per `duration` ms across its workers. */
export interface GlideMqRateLimit {
  max: number;
  duration: number;
}

/** glide-mq's per-minute metrics of finished jobs (`Queue.getMetrics`). */
export interface GlideMqMetrics {
  /** Jobs now in the completed (or failed) set. */
  count: number;
  data: Array<{ timestamp: number; count: number; avgDuration: number }>;
  meta: { resolution: "minute" };
}

/** A live glide-mq worker, from its registry key `w:<id>` (`Queue.getWorkers`). */
export interface GlideMqWorker {
  id: string;
  addr: string;
  pid: number;
  startedAt: number;
  age: number;
  activeJobs: number;
}

/** When a glide-mq job scheduler fires (`Queue.upsertJobScheduler`'s ScheduleOpts; dates in epoch ms). */
export interface GlideMqSchedule {
  /** Five-field cron: minute hour day-of-month month day-of-week. */
  pattern?: string;
  every?: number;
  repeatAfterComplete?: number;
  tz?: string;
  startDate?: number;
  endDate?: number;
  limit?: number;
}

/** The job a scheduler adds each time it fires: name (the scheduler's by default), data and options. */
export interface GlideMqJobTemplate {
  name?: string;
  data?: unknown;
  opts?: Record<string, unknown>;
}

/** A job of a queue's dead-letter queue, as glide-mq's proxy answers it. */
export interface GlideMqDeadLetter {
  id: string;
  name: string;
  data: unknown;
  failedReason?: string;
  attemptsMade: number;
  originalJobId?: string;
  originalQueue?: string;
  timestamp: number;
}

/**
 * glide-mq's own view and administration of a queue, on a store that holds glide-mq's layout: what
 * its `Queue` class answers, for the glide-mq door to answer as glide-mq's proxy does. Priorities are
 * glide-mq's (1 first .. 2048, 0 none). A missing job is a NotFoundError; a job in a state that does
 * not allow the change an InvalidStateError.
 */
export interface GlideMqQueues {
  glideCounts(queue: string): Promise<GlideMqCounts>;
  /** `Queue.getJobs(state, start, end)`: the jobs of one of glide-mq's lists, in its order (end -1: to the last). */
  glideJobs(queue: string, state: keyof GlideMqCounts, start: number, end: number): Promise<Job[]>;
  changePriority(queue: string, id: string, priority: number): Promise<void>;
  changeDelay(queue: string, id: string, delay: number): Promise<void>;
  promote(queue: string, id: string): Promise<void>;
  /** Removes the waiting jobs (and the delayed ones, when asked); answers how many. */
  drain(queue: string, delayed: boolean): Promise<number>;
  /** Puts up to `count` failed jobs (0: all) back to waiting; answers how many. */
  retryFailed(queue: string, count: number): Promise<number>;
  /** Removes up to `limit` jobs of `state` that finished more than `graceMs` ago; answers their ids. */
  clean(queue: string, state: "completed" | "failed", graceMs: number, limit: number): Promise<string[]>;
  /**
   * Up to `count` entries of the events stream after the id `after`, at once (no blocking read: the
   * store's connection is shared); `lastEventId` is the newest entry's id, where a reader starts.
   */
  readEvents(queue: string, after: string, count: number): Promise<GlideMqEvent[]>;
  lastEventId(queue: string): Promise<string>;
  /** The global rate limit glide-mq's workers keep to (meta `rateLimitMax`/`rateLimitDuration`), or null. */
  rateLimit(queue: string): Promise<GlideMqRateLimit | null>;
  setRateLimit(queue: string, limit: GlideMqRateLimit | null): Promise<void>;
  /** Buckets `start`..`end` (-1: the last) of the per-minute metrics, oldest first. */
  metrics(queue: string, type: "completed" | "failed", start: number, end: number): Promise<GlideMqMetrics>;
  /** The workers registered on the queue now, oldest first. */
  workers(queue: string): Promise<GlideMqWorker[]>;
  /** The job schedulers (repeatable jobs) with their entries as glide-mq stores them. */
  schedulers(queue: string): Promise<Array<{ name: string; entry: Record<string, unknown> }>>;
  /** Removes a scheduler; false when there is none of that name. */
  removeScheduler(queue: string, name: string): Promise<boolean>;
  /**
   * Creates or changes a scheduler as `Queue.upsertJobScheduler` stores it (an unchanged schedule
   * keeps its next run and count); a schedule glide-mq would refuse is a ValidationError.
   */
  upsertScheduler(queue: string, name: string, schedule: GlideMqSchedule, template?: GlideMqJobTemplate): Promise<void>;
  /**
   * Jobs `start`..`end` (-1: the last) waiting in the queue's dead-letter queue (meta
   * `deadLetterQueueName`) that came from this queue; none when it has no dead-letter queue.
   */
  deadLetters(queue: string, start: number, end: number): Promise<GlideMqDeadLetter[]>;
  deadLetter(queue: string, id: string): Promise<GlideMqDeadLetter | null>;
  /** false when the dead-letter queue holds no such job of this queue. */
  removeDeadLetter(queue: string, id: string): Promise<boolean>;
  /** Adds the job again to the queue it failed in, then removes it from the dead-letter queue; null when there is none. */
  replayDeadLetter(queue: string, id: string): Promise<{ id: string; name: string } | null>;
}

export function hasGlideMqQueues(backend: Backend): backend is Backend & GlideMqQueues {
  return typeof (backend as Partial<GlideMqQueues>).glideCounts === "function";
}

/**
 * Deleting jobs outright, with everything the store keeps for them: what a migration's move mode does
 * to the source once the target holds a job. A job that is active (a worker holds it) is left alone.
 */
export interface JobRemoval {
  /** Removes the jobs of these ids that are not active; answers the ids it removed (an unknown id is not). */
  remove(queue: string, ids: string[]): Promise<string[]>;
}

export function hasJobRemoval(backend: Backend): backend is Backend & JobRemoval {
  return typeof (backend as Partial<JobRemoval>).remove === "function";
}

/** A node of a glide-mq flow tree (FlowProducer's FlowJob): children run first, the node once they all completed. */
export interface GlideMqFlowJob {
  name: string;
  queueName: string;
  data?: unknown;
  opts?: Record<string, unknown>;
  children?: GlideMqFlowJob[];
}

/** A node of a glide-mq DAG (FlowProducer.addDAG's DAGNode): `deps` name the nodes that must complete first. */
export interface GlideMqDagNode {
  name: string;
  queueName: string;
  data?: unknown;
  opts?: Record<string, unknown>;
  deps?: string[];
}

/** One job of a flow, as the proxy's flow record names it. */
export interface GlideMqFlowRef {
  jobId: string;
  queueName: string;
}

/** The proxy's record of a flow (`{flow:<id>}:meta|jobs|roots`): what GET /flows/:id starts from. */
export interface GlideMqFlowRecord {
  flowId: string;
  kind: "tree" | "dag";
  createdAt: number;
  jobs: GlideMqFlowRef[];
  roots: GlideMqFlowRef[];
}

/**
 * glide-mq's flows as its proxy writes them: FlowProducer.add's jobs, deps sets and events, plus the
 * proxy's flow record. A custom jobId that exists already is a ConflictError, and nothing is written.
 */
export interface GlideMqFlows {
  /** Writes the whole tree (nested, across queues) at once; answers its record (flowId = the root's id). */
  addFlow(flow: GlideMqFlowJob): Promise<GlideMqFlowRecord>;
  /**
   * Writes a DAG at once as FlowProducer.addDAG leaves it, with the proxy's record (a random flowId,
   * kind `dag`, the nodes without deps as roots); answers the record and each node's job id, in the
   * order of `nodes`. Duplicate names, unknown deps and cycles are a ValidationError; nothing is written.
   */
  addDag(nodes: GlideMqDagNode[]): Promise<{ record: GlideMqFlowRecord; ids: string[] }>;
  /** The record of a flow the proxy (or this gateway) wrote, or null. */
  flowRecord(flowId: string): Promise<GlideMqFlowRecord | null>;
  /** Forgets the record (the jobs stay, as the proxy's DELETE leaves them revoked or finished). */
  removeFlowRecord(flowId: string): Promise<void>;
}

export function hasGlideMqFlows(backend: Backend): backend is Backend & GlideMqFlows {
  return (
    typeof (backend as Partial<GlideMqFlows>).addFlow === "function" && typeof (backend as Partial<GlideMqFlows>).flowRecord === "function"
  );
}

/** Why and since when a glide-mq job is suspended (`job.suspend()`), with the signals it received. */
export interface GlideMqSuspension {
  reason?: string;
  suspendedAt: number;
  timeout?: number;
  signals: Array<{ name: string; data: unknown; receivedAt: number }>;
}

/** AI usage summed over jobs, as glide-mq's `Queue.getFlowUsage` and usage summary add it up. */
export interface GlideMqUsage {
  tokens: Record<string, number>;
  totalTokens: number;
  costs: Record<string, number>;
  totalCost: number;
  costUnit?: string;
  jobCount: number;
  models: Record<string, number>;
}

/** A flow's budget (`budget:<flowId>`), as glide-mq's `Queue.getFlowBudget` reads it. */
export interface GlideMqBudget extends Omit<GlideMqBudgetLimits, "onExceeded"> {
  usedTokens: number;
  usedCost: number;
  exceeded: boolean;
  onExceeded: "pause" | "fail";
}

/** The limits of a flow's budget as FlowProducer.add takes them (`{budget}`), checked by glide-mq's workers. */
export interface GlideMqBudgetLimits {
  maxTotalTokens?: number;
  maxTokens?: Record<string, number>;
  tokenWeights?: Record<string, number>;
  maxTotalCost?: number;
  maxCosts?: Record<string, number>;
  costUnit?: string;
  onExceeded?: "pause" | "fail";
}

/** A message a broadcast subscription received: the job's id, its name as the subject, data and time. */
export interface GlideMqBroadcastMessage {
  id: string;
  subject: string;
  data: unknown;
  timestamp: number;
}

/**
 * What glide-mq's workers write beside a job and its proxy reads back: a job's output stream
 * (`job.stream()`), suspensions and the signals that resume them, reported AI usage and flow budgets,
 * and broadcast subscriptions (one consumer group per subscription on the queue's stream).
 */
export interface GlideMqExtras {
  /** Up to `count` entries of the job's output stream after the entry id `after` (from the first when null). */
  jobStream(queue: string, id: string, after: string | null, count: number): Promise<Array<{ id: string; fields: Record<string, string> }>>;
  /** The suspension of a job in state `suspended`, else null. */
  suspension(queue: string, id: string): Promise<GlideMqSuspension | null>;
  /** Jobs `start`..`end` (-1: the last) of the suspended set, soonest timeout first. */
  suspendedJobs(queue: string, start: number, end: number): Promise<Job[]>;
  /** Resumes a suspended job with a signal (`data` JSON, undefined for none); false when it was not suspended. */
  signal(queue: string, id: string, name: string, data: unknown): Promise<boolean>;
  /** The usage reported by a job and its direct children (its deps set). */
  flowUsage(queue: string, parentId: string): Promise<GlideMqUsage>;
  flowBudget(queue: string, flowId: string): Promise<GlideMqBudget | null>;
  /**
   * Gives a flow just added a budget, as FlowProducer.add does after writing the flow: the hash
   * `budget:<flowId>` in the root's queue, and its key in every job's `budgetKey` field.
   */
  setFlowBudget(queue: string, flowId: string, limits: GlideMqBudgetLimits, jobs: GlideMqFlowRef[]): Promise<void>;
  /** The queues that reported usage (`<prefix>:usage:queues`). */
  usageQueues(): Promise<string[]>;
  /** The per-minute usage buckets of a queue starting at these times (an empty record where none). */
  usageBuckets(queue: string, bucketStarts: number[]): Promise<Array<Record<string, string>>>;
  /** Creates the subscription's consumer group at the stream's end, if it does not exist. */
  subscribe(queue: string, subscription: string): Promise<void>;
  /**
   * Takes up to `count` new messages of the subscription, as glide-mq's BroadcastWorker takes and
   * completes each (the stream entry kept for the other subscriptions); no blocking read.
   */
  receiveBroadcast(queue: string, subscription: string, consumer: string, count: number): Promise<GlideMqBroadcastMessage[]>;
}

export function hasGlideMqExtras(backend: Backend): backend is Backend & GlideMqExtras {
  return typeof (backend as Partial<GlideMqExtras>).receiveBroadcast === "function";
}
