import { randomUUID } from "node:crypto";
import {
  type Backend,
  BackendUnavailableError,
  type Capabilities,
  type CompleteOptions,
  ConflictError,
  DEFAULT_LEASE_MS,
  type EnqueueInput,
  type EnqueueResult,
  type ExportOptions,
  type FailOptions,
  type HeartbeatOptions,
  type ImportResult,
  type Job,
  type JobCounts,
  type JobEventFeed,
  type JobRemoval,
  type Json,
  type ListOptions,
  type NormalizedEnqueueInput,
  NotFoundError,
  type Page,
  type QlessCommands,
  type QlessReply,
  type Recurrence,
  type RecurringJobs,
  type ReserveOptions,
  UnsupportedError,
  ValidationError,
  backoffDelay,
  decodeCursor,
  encodeCursor,
  groupCommit,
  guardBackend,
  normalizeEnqueueInput,
  runAtOf,
} from "@switchyard/core";
import { type EnqueueRecord, canBuild, createdDocument } from "./created.js";
import { qlessDataProblem } from "./data-text.js";
import { translateError } from "./errors.js";
import { qlessEventFeed } from "./event-feed.js";
import {
  type ImportRecord,
  type StoredRecord,
  type SwitchyardDocument,
  type SwitchyardMeta,
  heldJob,
  list,
  storedAsWritten,
  toCoreJob,
  toImportRecord,
} from "./job-mapping.js";
import { type QlessBackendOptions, resolveOptions } from "./options.js";
import { type RecurrenceFields, fromRecurrenceFields, recurrenceArgs } from "./recurring.js";
import { QlessScriptError, callQless, formatNow, qlessScript } from "./script.js";

/** As many single enqueues as one bulk share a script call at most. */
const MAX_PER_CALL = 1000;

let lastNow = 0;

/**
 * Epoch seconds with microseconds, strictly increasing in this process. qless orders equal
 * priorities by the `now` of the put, so two puts in one millisecond must not share it.
 */
function monotonicNow(): number {
  const now = Math.floor((performance.timeOrigin + performance.now()) * 1000);
  lastNow = now > lastNow ? now : lastNow + 1;
  return lastNow / 1e6;
}

export const QLESS_CAPABILITIES: Capabilities = {
  delays: true,
  priorities: true,
  dependencies: true,
  tags: true,
  progress: true,
  uniqueKeys: true,
  leases: true,
  pause: true,
  results: true,
  keepsCompleted: true,
  customIds: true,
  editing: false,
};

const isOffset = (value: unknown): value is { offset: number } =>
  typeof value === "object" && value !== null && Number.isInteger((value as { offset?: unknown }).offset);

/**
 * An export cursor: the last jid handed out (export pages go by jid order) and the name of the
 * export's snapshot of jids in Redis (see switchyard.export); cursors of older versions have none.
 */
const isAfterJid = (value: unknown): value is { after: string; snap?: string } =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as { after?: unknown }).after === "string" &&
  ["string", "undefined"].includes(typeof (value as { snap?: unknown }).snap);

/**
 * A core Backend over the qless layout in Redis, through Switchyard's own qless script. The
 * script's qless commands are also available as `qless(command, now, ...args)` for the gateway's
 * qless door and for anything that speaks qless.
 */
export function createQlessBackend(options: QlessBackendOptions): QlessBackend {
  const { redis, ownsClient, failureGroup } = resolveOptions(options);

  async function call(command: string, ...args: (string | number)[]): Promise<QlessReply> {
    try {
      return await callQless(redis, command, monotonicNow(), ...args);
    } catch (error) {
      throw translateError(error);
    }
  }

  async function document(command: string, ...args: (string | number)[]): Promise<SwitchyardDocument | null> {
    const reply = await call(command, ...args);
    if (typeof reply !== "string") return null;
    const parsed = JSON.parse(reply) as SwitchyardDocument | false;
    return parsed || null;
  }

  async function page(command: string, queue: string, limit: number, cursor: string | undefined, ...args: string[]) {
    checkLimit(limit);
    const offset = decodeCursor(cursor, isOffset)?.offset ?? 0;
    const reply = JSON.parse((await call(command, queue, ...args, offset, limit)) as string) as {
      docs: SwitchyardDocument[] | Record<string, never>;
      more: boolean;
    };
    return {
      items: list(reply.docs).map((doc) => toCoreJob(doc, queue)),
      cursor: reply.more ? encodeCursor({ offset: offset + limit }) : null,
    };
  }

  function checkLimit(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new ValidationError("qless-redis: limit must be a positive integer");
  }

  async function mustGet(queue: string, id: string): Promise<Job> {
    const job = await backend.get(queue, id);
    if (!job) throw new NotFoundError(`qless-redis: no job ${id} in queue ${queue}`);
    return job;
  }

  /** One job as switchyard.enqueue-many takes it: every value a string, as qless's put reads its argv. */
  function enqueueRecord(input: NormalizedEnqueueInput, now: number): EnqueueRecord {
    const runAt = runAtOf(input, now);
    // Each put has its own instant, as separate puts would: equal priorities keep batch order. The
    // delay counts from that same instant, so that qless's `now + delay` lands on runAt exactly.
    const putAt = monotonicNow();
    const meta: SwitchyardMeta = {};
    if (input.backoff) meta.backoff = input.backoff;
    if (input.uniqueKey) meta.uniqueKey = input.uniqueKey;
    if (input.native && Object.keys(input.native).length > 0) meta.native = input.native;
    const data = JSON.stringify(input.data);
    const problem = qlessDataProblem(data);
    if (problem) throw new ValidationError(`qless-redis: ${problem}`);
    const record = {
      now: formatNow(putAt),
      jid: input.id ?? randomUUID().replaceAll("-", ""),
      klass: input.name,
      data,
      delay: String(runAt === null ? 0 : Math.max(0, runAt / 1000 - putAt)),
      priority: String(input.priority),
      tags: JSON.stringify(input.tags),
      retries: String(input.maxAttempts - 1),
      depends: JSON.stringify(input.dependsOn),
      unique: input.uniqueKey ?? "",
      meta: Object.keys(meta).length > 0 ? JSON.stringify(meta) : "",
    };
    return { ...record, build: canBuild(record) ? "1" : "" };
  }

  /**
   * Enqueues the whole batch in one script call, which decides every job before it writes any:
   * all are written or (on a jid another queue uses) none. A job the call created is built here from
   * what was sent (createdDocument); any other comes back from the same call as the script read it,
   * so nothing can change the jobs between the write and the answer.
   */
  async function enqueueMany(queue: string, inputs: NormalizedEnqueueInput[]): Promise<EnqueueResult[]> {
    if (inputs.length === 0) return [];
    const now = Date.now();
    const records = inputs.map((input) => enqueueRecord(input, now));
    // Each job's data goes as a line of its own argument (see the script), not inside its record.
    const sent = records.map(({ data: _, ...record }) => record);
    const dataLines = records.map((record) => record.data).join("\n");
    const reply = JSON.parse((await call("switchyard.enqueue-many", queue, JSON.stringify(sent), dataLines)) as string) as
      | Array<{ created: number; doc?: SwitchyardDocument; time?: string }>
      | Record<string, never>;
    return list(reply).map(({ created, doc, time }, i) => ({
      job: doc ? toCoreJob(doc, queue) : toCoreJob(createdDocument(records[i] as EnqueueRecord, queue, time as string), queue, true),
      created: created === 1,
    }));
  }

  /**
   * Single enqueues of one queue that arrive while its enqueue calls are in flight share the next
   * call (core's groupCommit), up to a bulk's size; two calls in flight, each with its share of the
   * enqueues outstanding, keep Redis and this process busy at once (Backend enqueues at 50 in flight,
   * alternated runs: 31,000-34,600 jobs/s unbalanced, 40,400-42,500 balanced). A call the script
   * refused wrote nothing, so its jobs are sent again one by one and a refused job fails its own
   * caller only.
   */
  const enqueueInBatch = groupCommit(enqueueMany, {
    take: (waiting) => Math.min(waiting.length, MAX_PER_CALL),
    maxInFlight: 2,
    balanced: true,
    retryAlone: (error) => !(error instanceof BackendUnavailableError),
  });

  const backend = {
    kind: "qless-redis",
    capabilities: QLESS_CAPABILITIES,

    /**
     * Runs any qless command (`put`, `pop`, `config.set`...) with qless's own reply shapes; qless's
     * refusals reject with QlessScriptError, store failures with the core's typed errors.
     */
    async qless(command: string, now: number | string, ...args: (string | number)[]): Promise<QlessReply> {
      try {
        return await callQless(redis, command, now, ...args);
      } catch (error) {
        throw error instanceof QlessScriptError ? error : translateError(error);
      }
    },

    ...qlessEventFeed(redis),

    async ready() {
      try {
        if (redis.status === "wait") await redis.connect();
        await redis.script("LOAD", qlessScript().source);
      } catch (error) {
        throw translateError(error);
      }
    },

    async close() {
      if (ownsClient) await redis.quit().catch(() => redis.disconnect());
    },

    async enqueue(queue: string, input: EnqueueInput) {
      return enqueueInBatch(queue, normalizeEnqueueInput(input));
    },

    async enqueueBulk(queue: string, inputs: EnqueueInput[]) {
      return enqueueMany(
        queue,
        inputs.map((input) => normalizeEnqueueInput(input)),
      );
    },

    async reserve(queue: string, options: ReserveOptions) {
      const reply = JSON.parse((await call("switchyard.pop", queue, ...popArguments(options))) as string);
      return list(reply as SwitchyardDocument[]).map((doc) => toCoreJob(doc, queue));
    },

    async heartbeat(queue: string, id: string, { worker, leaseMs = DEFAULT_LEASE_MS, progress }: HeartbeatOptions) {
      if (progress !== undefined) await call("switchyard.progress", queue, id, worker, JSON.stringify(progress));
      const doc = await document("switchyard.heartbeat", queue, id, worker, leaseMs / 1000);
      if (!doc) throw new NotFoundError(`qless-redis: no job ${id} in queue ${queue}`);
      return toCoreJob(doc, queue);
    },

    async setProgress(queue: string, id: string, { worker, progress }: { worker?: string; progress: Json }) {
      const doc = await document("switchyard.progress", queue, id, worker ?? "", JSON.stringify(progress));
      if (!doc) throw new NotFoundError(`qless-redis: no job ${id} in queue ${queue}`);
      return toCoreJob(doc, queue);
    },

    async complete(queue: string, id: string, options: CompleteOptions = {}) {
      const doc = await document("switchyard.complete", queue, id, ...completeArguments(options));
      if (!doc) throw new NotFoundError(`qless-redis: no job ${id} in queue ${queue}`);
      return toCoreJob(doc, queue);
    },

    /** One script call: the completion, then (when it succeeded) the pop of the worker's next jobs. */
    async completeAndReserve(queue: string, id: string, options: CompleteOptions, next: ReserveOptions) {
      const pop = popArguments(next);
      const reply = (await call("switchyard.complete-and-pop", queue, id, ...completeArguments(options), ...pop)) as string;
      const { completed, next: docs } = JSON.parse(reply) as { completed: SwitchyardDocument; next: SwitchyardDocument[] };
      return { completed: toCoreJob(completed, queue), next: list(docs).map((doc) => toCoreJob(doc, queue)) };
    },

    async fail(queue: string, id: string, { worker, error, retry, retryDelay }: FailOptions) {
      const job = await mustGet(queue, id);
      const delayMs = retryDelay ?? backoffDelay(job.backoff, job.attempts);
      const doc = await document(
        "switchyard.fail",
        queue,
        id,
        worker ?? "",
        error.group ?? failureGroup(queue),
        error.message,
        retry === false ? "0" : "1",
        delayMs / 1000,
      );
      if (!doc) throw new NotFoundError(`qless-redis: no job ${id} in queue ${queue}`);
      return toCoreJob(doc, queue);
    },

    async cancel(queue: string, id: string) {
      await call("switchyard.cancel", queue, id);
    },

    async get(queue: string, id: string) {
      const doc = await document("switchyard.get", queue, id);
      return doc ? toCoreJob(doc, queue) : null;
    },

    async getMany(queue: string, ids: string[]) {
      if (ids.length === 0) return [];
      const docs = JSON.parse((await call("switchyard.get-many", queue, JSON.stringify(ids))) as string) as Array<
        SwitchyardDocument | false
      >;
      return ids.map((_, i) => {
        const doc = docs[i];
        return doc ? toCoreJob(doc, queue) : null;
      });
    },

    async remove(queue: string, ids: string[]) {
      if (ids.length === 0) return [];
      // cjson encodes an empty table as {}, never []: an empty answer is an object.
      const removed = JSON.parse((await call("switchyard.remove", queue, JSON.stringify(ids))) as string) as string[] | object;
      return Array.isArray(removed) ? removed : [];
    },

    async list(queue: string, { state, limit = 100, cursor }: ListOptions): Promise<Page<Job>> {
      return page("switchyard.list", queue, limit, cursor, state);
    },

    async counts(queue: string) {
      return JSON.parse((await call("switchyard.counts", queue)) as string) as JobCounts;
    },

    async queues() {
      return list((await call("switchyard.queues")) as string[]);
    },

    async putRecurrence(recurrence: Recurrence) {
      await call("switchyard.put-recurrence", ...recurrenceArgs(recurrence));
    },

    async recurrence(id: string) {
      const [fields] = JSON.parse((await call("switchyard.recurrence", id)) as string) as [RecurrenceFields | false];
      return fields ? fromRecurrenceFields(fields) : null;
    },

    async recurrences(queue: string) {
      const found = JSON.parse((await call("switchyard.recurrences", queue)) as string) as RecurrenceFields[] | object;
      return Array.isArray(found) ? found.map(fromRecurrenceFields) : [];
    },

    async removeRecurrence(id: string) {
      return (await call("switchyard.remove-recurrence", id)) === 1;
    },

    async advanceRecurrence(id: string, seen: number, count: number, nextAt: number) {
      return (await call("switchyard.advance-recurrence", id, seen, count, nextAt / 1000)) === 1;
    },

    async pause(queue: string) {
      await call("pause", queue);
    },

    async resume(queue: string) {
      await call("unpause", queue);
    },

    async isPaused(queue: string) {
      return (await redis.sismember("ql:paused_queues", queue)) === 1;
    },

    async export(queue: string, { limit = 100, cursor }: ExportOptions = {}) {
      checkLimit(limit);
      const position = decodeCursor(cursor, isAfterJid);
      const after = position?.after ?? "";
      const snap = position?.snap ?? randomUUID();
      const reply = JSON.parse((await call("switchyard.export", queue, snap, after, limit)) as string) as {
        docs: SwitchyardDocument[] | Record<string, never>;
        more: boolean;
        last?: string;
      };
      return {
        items: list(reply.docs).map((doc) => toCoreJob(doc, queue)),
        cursor: reply.more && reply.last ? encodeCursor({ after: reply.last, snap }) : null,
      };
    },

    async import(queue: string, jobs: Job[]): Promise<ImportResult> {
      const records = jobs.map((job) => {
        const record = toImportRecord(job, queue, failureGroup(queue));
        if (!record) throw new UnsupportedError(`qless-redis: qless deletes canceled jobs, so job ${job.id} cannot be imported`);
        return record;
      });
      if (records.length === 0) return { imported: 0, skipped: [], held: [] };
      // One script call per page, writing the records in order (each was validated above). It answers
      // the state each written record was stored in (its other fields are the record's), and what the
      // queue holds of a jid it had already, read from the stored record.
      const answers = (await call("switchyard.import-many", queue, JSON.stringify(records))) as Array<
        [1, ImportRecord["state"]] | [0, StoredRecord | null]
      >;
      const skipped = records.filter((_, i) => answers[i]?.[0] !== 1).map((record) => record.jid);
      const held = records.map((record, i) => {
        const answer = answers[i];
        if (answer?.[0] === 1) return heldJob(record.jid, storedAsWritten(record, answer[1]), queue);
        return answer?.[1] ? heldJob(record.jid, answer[1], queue) : null;
      });
      return { imported: records.length - skipped.length, skipped, held };
    },
  } satisfies QlessBackend;

  return guardBackend("qless-redis", backend);
}

/** The core Backend plus qless's command API, which the gateway's qless door discovers. */
export interface QlessBackend extends Backend, QlessCommands, JobRemoval, JobEventFeed, RecurringJobs {}

/** switchyard.pop's arguments after the queue: the worker, how many, the lease in seconds. */
function popArguments({ worker, count = 1, leaseMs = DEFAULT_LEASE_MS }: ReserveOptions): [string, number, number] {
  if (!worker) throw new ValidationError("qless-redis: reserve needs a worker name");
  if (!Number.isInteger(count) || count < 1) throw new ValidationError("qless-redis: count must be a positive integer");
  return [worker, count, leaseMs / 1000];
}

/** switchyard.complete's arguments after the queue and jid: the worker ("" for any) and the result as JSON ("" for none). */
function completeArguments(options: CompleteOptions): [string, string] {
  return [options.worker ?? "", options.result === undefined ? "" : JSON.stringify(options.result)];
}
