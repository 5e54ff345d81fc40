import { ValidationError } from "@switchyard/core";

/** glide-mq's score shift: `priority * 2^42 + time` orders `scheduled` by band, then by due time. */
export const PRIORITY_SHIFT = 2 ** 42;
/** The consumer group every glide-mq worker reads the stream through. */
export const CONSUMER_GROUP = "workers";
export const DEFAULT_PREFIX = "glide";

/** Every key of one queue, `<prefix>:{<queue>}:…`: one hash tag, so one cluster slot. */
export interface QueueKeys {
  base: string;
  id: string;
  stream: string;
  scheduled: string;
  events: string;
  lifo: string;
  priority: string;
  listActive: string;
  meta: string;
  dedup: string;
  completed: string;
  failed: string;
  metricsCompleted: string;
  metricsFailed: string;
  /** glide-mq's job schedulers: field = scheduler name, value = its entry as JSON. */
  schedulers: string;
  /** Switchyard's own: active jobs under a Switchyard lease, scored by expiry. glide-mq never reads it. */
  leases: string;
  /** Switchyard's own: jobs enqueued here that wait on dependencies (state waiting-children). */
  blocked: string;
  /** Switchyard's own: the ids of the recurring jobs defined on this queue, scored by next run (recurring.ts). */
  recurring: string;
  job(id: string): string;
  deps(id: string): string;
  worker(consumerId: string): string;
}

const INVALID_QUEUE_NAME = /[{}:]/;

/** No control characters (code points below 0x20, and 0x7f), braces or colons. */
function hasInvalidJobIdChar(id: string): boolean {
  for (const char of id) {
    const code = char.codePointAt(0) ?? 0;
    if (code < 0x20 || code === 0x7f || char === "{" || char === "}" || char === ":") return true;
  }
  return false;
}

export function validateQueueName(queue: string): void {
  if (queue.length === 0 || queue.length > 256) throw new ValidationError("glidemq-valkey: a queue name has 1 to 256 characters");
  if (INVALID_QUEUE_NAME.test(queue)) {
    throw new ValidationError(`glidemq-valkey: queue name "${queue}" must not contain curly braces or colons`);
  }
}

/** glide-mq's custom job id rules: at most 256 characters, no control characters, braces or colons. */
export function validateJobId(id: string): void {
  if (id.length === 0 || id.length > 256) throw new ValidationError("glidemq-valkey: a job id has 1 to 256 characters");
  if (hasInvalidJobIdChar(id)) {
    throw new ValidationError(`glidemq-valkey: job id "${id}" must not contain control characters, curly braces, or colons`);
  }
}

export function queueKeys(queue: string, prefix = DEFAULT_PREFIX): QueueKeys {
  validateQueueName(queue);
  const base = `${prefix}:{${queue}}:`;
  return {
    base,
    id: `${base}id`,
    stream: `${base}stream`,
    scheduled: `${base}scheduled`,
    events: `${base}events`,
    lifo: `${base}lifo`,
    priority: `${base}priority`,
    listActive: `${base}list-active`,
    meta: `${base}meta`,
    dedup: `${base}dedup`,
    completed: `${base}completed`,
    failed: `${base}failed`,
    metricsCompleted: `${base}metrics:completed`,
    metricsFailed: `${base}metrics:failed`,
    schedulers: `${base}schedulers`,
    leases: `${base}sy:leases`,
    blocked: `${base}sy:blocked`,
    recurring: `${base}sy:recurring`,
    job: (id) => `${base}job:${id}`,
    deps: (id) => `${base}deps:${id}`,
    worker: (consumerId) => `${base}w:${consumerId}`,
  };
}

/**
 * Switchyard's own hash of one recurring job's definition (recurring.ts). Its ids are the store's, not
 * a queue's, so the key is outside every queue's, hash-tagged by the id: a definition moved to another
 * queue keeps its key, and on a cluster it lands in a slot of its own.
 */
export function recurrenceKey(id: string, prefix = DEFAULT_PREFIX): string {
  return `${prefix}:sy:recurring:{${id}}`;
}
