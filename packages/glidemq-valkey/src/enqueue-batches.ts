import type { AddOutcome } from "./glide-functions.js";

/** An enqueue waiting for its queue's next add call. */
interface Pending {
  args: string[];
  resolve: (outcome: AddOutcome) => void;
  reject: (error: unknown) => void;
}

/** As many enqueues as one bulk chunk share a call at most. */
const MAX_PER_CALL = 1000;

/** add.lua's argument that lists a job's dependencies (producer.ts's prepare). */
const DEPENDS_ON = 15;

/**
 * The next calls for one script call, in arrival order: a job with dependencies alone (a missing
 * dependency refuses its whole call), else those up to the next such job.
 */
function takeCalls(pending: Pending[]): Pending[] {
  let count = 0;
  while (count < Math.min(pending.length, MAX_PER_CALL) && (pending[count] as Pending).args[DEPENDS_ON] === "") count++;
  return pending.splice(0, Math.max(1, count));
}

/**
 * Group commit for single enqueues: while one add call for a queue is in flight, the enqueues that
 * arrive for that queue wait and then go together in the next one (one atomic add.lua call, in
 * arrival order, each with its own outcome, exactly as the same adds one by one would leave them).
 * A lone enqueue goes at once, so nothing waits on a timer; under load Redis runs the script once per
 * call instead of once per job. `add` gets `prepare`d arguments (checked before, so that a job its
 * checks refuse fails its own caller only).
 */
export function enqueueBatches(add: (queue: string, prepared: string[][]) => Promise<AddOutcome[]>) {
  const queues = new Map<string, Pending[]>();

  async function drain(queue: string, pending: Pending[]): Promise<void> {
    try {
      while (pending.length > 0) {
        const calls = takeCalls(pending);
        try {
          const outcomes = await add(
            queue,
            calls.map((call) => call.args),
          );
          calls.forEach((call, i) => {
            const outcome = outcomes[i];
            if (outcome) call.resolve(outcome);
            else call.reject(new Error("glidemq-valkey: add returned no outcome"));
          });
        } catch (error) {
          for (const call of calls) call.reject(error);
        }
      }
    } finally {
      queues.delete(queue);
    }
  }

  return function addInBatch(queue: string, args: string[]): Promise<AddOutcome> {
    return new Promise((resolve, reject) => {
      let pending = queues.get(queue);
      const starting = pending === undefined;
      if (!pending) {
        pending = [];
        queues.set(queue, pending);
      }
      pending.push({ args, resolve, reject });
      // Started after the current task, so that enqueues issued together go together.
      if (starting) {
        const started = pending;
        queueMicrotask(() => void drain(queue, started));
      }
    });
  };
}
