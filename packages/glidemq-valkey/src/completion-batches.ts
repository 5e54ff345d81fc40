import {
  type CompleteOptions,
  type CompletedAndNext,
  DEFAULT_LEASE_MS,
  type Job,
  type ReserveOptions,
  groupCommit,
} from "@switchyard/core";
import { flatToRecord } from "./codec.js";
import { throwRefusal, toActivated } from "./consumer.js";
import type { HeldHashes } from "./held-hashes.js";
import { CONSUMER_GROUP, type QueueKeys } from "./keys.js";
import { toJob } from "./mapping.js";
import { type RedisClient, runScript } from "./scripts.js";

/** A completion waiting for its queue's next call. */
interface Completion {
  id: string;
  options: CompleteOptions;
  next: ReserveOptions | undefined;
  /** The backend's clock when the caller asked (callers of one batch may run on different clocks). */
  now: number;
}

/** What one completion of a call came to: the jobs, or the refusal of that completion alone. */
type Outcome = { completed: Job; ended: Record<string, string>; next: Job[] } | { refusal: unknown };

/** More completions than this in one script call would hold Redis for too long at a time. */
const MAX_PER_CALL = 100;
/**
 * Completions whose clocks lie further apart than this (a qless client's own `now` beside real time)
 * go in separate script calls, each at the latest time of its calls.
 */
const SAME_CLOCK_MS = 1_000;

/** How many of the waiting completions go in the next script call: in order, up to MAX_PER_CALL, all on about the first one's clock. */
function takeCalls(waiting: readonly Completion[]): number {
  const first = waiting[0]?.now ?? 0;
  let count = 0;
  while (count < Math.min(waiting.length, MAX_PER_CALL) && Math.abs((waiting[count] as Completion).now - first) <= SAME_CLOCK_MS) count++;
  return count;
}

/** The sy lease fields completion deletes from a job that had them (lib/complete.lua). */
const LEASE_FIELDS = new Set(["syWorker", "syLeaseUntil", "syLeaseStart", "syEntryId"]);

/**
 * The job's hash as completion left it, from the hash before it (read by the script, or the copy this
 * Backend held from its reserve) with what completion wrote: fields keep their places, new ones come
 * last, as HGETALL would list them.
 */
function finishedHash(before: Record<string, string>, returnvalue: string, finishedOn: string): Record<string, string> {
  const leased = "syWorker" in before;
  const hash: Record<string, string> = {};
  for (const field in before) if (!leased || !LEASE_FIELDS.has(field)) hash[field] = before[field] as string;
  hash.state = "completed";
  hash.returnvalue = returnvalue;
  hash.finishedOn = finishedOn;
  return hash;
}

/**
 * Group commit for completions (core's groupCommit): while a queue's script calls are in flight (two at most),
 * the completions that arrive for that queue wait and then go together in the next one
 * (complete-reserve-many.lua), each with its own lease check and, for completeAndReserve, its own
 * reserve. A lone completion goes at once, so nothing waits on a timer; under load a call carries
 * many, and Redis runs the library, the queue's checks and one round trip once per call instead of
 * once per job (as glide-mq's Worker batches its own completions). The hashes of the jobs reserved
 * here are kept in `held`, so that their completion reads and sends back only what it checks.
 */
export function completionBatches(
  ready: () => Promise<RedisClient>,
  keysOf: (queue: string) => QueueKeys,
  consumerName: (worker: string) => string,
  held: HeldHashes,
  clock: () => number = Date.now,
) {
  async function run(queue: string, calls: Completion[]): Promise<Outcome[]> {
    const redis = await ready();
    const k = keysOf(queue);
    const now = Math.max(...calls.map((call) => call.now));
    const args: Array<string | number> = [now, CONSUMER_GROUP];
    const returnvalues = calls.map((call) => JSON.stringify(call.options.result ?? null));
    const copies = calls.map((call) => held.take(queue, call.id));
    calls.forEach(({ id, options, next }, i) => {
      args.push(id, returnvalues[i] as string, options.worker ?? "");
      args.push(next ? consumerName(next.worker) : "", next?.worker ?? "", next ? (next.count ?? 1) : 0);
      args.push(next ? now + (next.leaseMs ?? DEFAULT_LEASE_MS) : "", copies[i]?.processedOn ?? "");
    });
    const replies = (await runScript(redis, "complete-reserve-many", [k.stream, k.meta], args)) as unknown[][];
    return calls.map((call, i) => {
      const reply = replies[i] as [string, unknown, string[], unknown[], string];
      try {
        throwRefusal(reply, queue, call.id);
      } catch (refusal) {
        return { refusal };
      }
      const [, read, deps, reserved, finishedOn] = reply;
      // An empty hash: the job was still in the run whose copy was sent.
      const before = Array.isArray(read) && read.length > 0 ? flatToRecord(read) : (copies[i] ?? {});
      const ended = finishedHash(before, returnvalues[i] as string, String(finishedOn));
      return {
        completed: toJob(queue, ended, null, deps),
        ended,
        next: reserved.map((raw) => {
          const { id, hash } = toActivated(raw);
          held.keep(queue, id, hash);
          return toJob(queue, hash, null);
        }),
      };
    });
  }

  // Three calls of a queue in flight, each with its share of the completions outstanding: the process
  // handles one call's answers while Redis runs the others. With one call the two took turns; with
  // two unbalanced ones, workers chaining jobs drifted into one large call and one small one and took
  // turns again. Backend cycles, 30,000 jobs: 10 workers 18,500-19,200 -> 23,000-23,900 jobs/s,
  // 50 workers 22,800-25,500 -> 27,900-31,300 (two calls unbalanced -> three balanced). Redis still
  // runs them one after the other, each whole.
  const completeOne = groupCommit(run, { take: takeCalls, maxInFlight: 3, balanced: true });

  /**
   * Completes job `id` (for `options.worker` when given) and, with `next`, reserves that worker's next
   * jobs; `ended` is the finished hash, for what a glide-mq worker does after a job ends.
   */
  return async function completeInBatch(
    queue: string,
    id: string,
    options: CompleteOptions,
    next?: ReserveOptions,
  ): Promise<CompletedAndNext & { ended: Record<string, string> }> {
    const outcome = await completeOne(queue, { id, options, next, now: clock() });
    if ("refusal" in outcome) throw outcome.refusal;
    return outcome;
  };
}
