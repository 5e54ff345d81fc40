/** A call waiting for its key's next send. */
interface Pending<I, O> {
  item: I;
  resolve: (outcome: O) => void;
  reject: (error: unknown) => void;
}

/** One key's calls: those waiting for a send, and how many sends are in flight. */
interface KeyState<I, O> {
  waiting: Array<Pending<I, O>>;
  inFlight: number;
  /** Items in the sends in flight. */
  itemsInFlight: number;
  scheduled: boolean;
}

export interface GroupCommitOptions<I> {
  /** How many of the waiting items (at least one) go in the next send; all of them by default. */
  take?: (waiting: readonly I[]) => number;
  /**
   * Sends of one key in flight at once (1 by default). Two keep a store and its client busy at the
   * same time: the next batch gathers and is encoded while the store runs the one before. Sends on
   * one connection still run in order.
   */
  maxInFlight?: number;
  /**
   * Whether a send of several items that failed with this error wrote nothing, so that each item may
   * be sent again alone and get its own outcome (a refusal of one item must not fail its
   * neighbours). Never, by default: each caller then gets the send's error.
   */
  retryAlone?: (error: unknown) => boolean;
  /**
   * With several sends in flight, whether each send takes only its share of the calls outstanding
   * (waiting and in flight, split over maxInFlight), keeping the rest for the next free slot. Callers
   * that send again as soon as they are answered (workers chaining jobs) otherwise drift into one
   * large send and one small one, and the store and its client take turns instead of working at once.
   */
  balanced?: boolean;
}

/**
 * Group commit without a timer: while a key's (a queue's) sends are in flight, the calls that arrive
 * for that key wait, and then go together in the next send, in arrival order, each answered with its
 * own outcome. A lone call goes at once (after the current task, so that calls issued together go
 * together); under load a store runs one command for many callers instead of one each. `send`
 * answers one outcome per item, in order.
 */
export function groupCommit<I, O>(
  send: (key: string, items: I[]) => Promise<O[]>,
  { take = (waiting) => waiting.length, maxInFlight = 1, retryAlone = () => false, balanced = false }: GroupCommitOptions<I> = {},
): (key: string, item: I) => Promise<O> {
  const keys = new Map<string, KeyState<I, O>>();

  async function sendAlone(key: string, call: Pending<I, O>): Promise<void> {
    try {
      const [outcome] = await send(key, [call.item]);
      call.resolve(outcome as O);
    } catch (error) {
      call.reject(error);
    }
  }

  async function sendBatch(key: string, calls: Array<Pending<I, O>>): Promise<void> {
    try {
      const outcomes = await send(
        key,
        calls.map((call) => call.item),
      );
      if (outcomes.length !== calls.length) throw new Error(`group commit: ${outcomes.length} outcomes for ${calls.length} items`);
      calls.forEach((call, i) => call.resolve(outcomes[i] as O));
    } catch (error) {
      if (calls.length > 1 && retryAlone(error)) for (const call of calls) await sendAlone(key, call);
      else for (const call of calls) call.reject(error);
    }
  }

  function flush(key: string, state: KeyState<I, O>): void {
    state.scheduled = false;
    while (state.waiting.length > 0 && state.inFlight < maxInFlight) {
      const share = balanced ? Math.ceil((state.waiting.length + state.itemsInFlight) / maxInFlight) : state.waiting.length;
      const count = Math.max(1, Math.min(share, take(state.waiting.map((call) => call.item))));
      state.inFlight++;
      state.itemsInFlight += count;
      void sendBatch(key, state.waiting.splice(0, count)).then(() => {
        state.inFlight--;
        state.itemsInFlight -= count;
        if (state.waiting.length > 0) flush(key, state);
        else if (state.inFlight === 0) keys.delete(key);
      });
    }
  }

  return (key, item) =>
    new Promise<O>((resolve, reject) => {
      let state = keys.get(key);
      if (!state) {
        state = { waiting: [], inFlight: 0, itemsInFlight: 0, scheduled: false };
        keys.set(key, state);
      }
      state.waiting.push({ item, resolve, reject });
      // Started after the current task, so that calls issued together go together.
      if (!state.scheduled && state.inFlight < maxInFlight) {
        state.scheduled = true;
        const scheduled = state;
        queueMicrotask(() => flush(key, scheduled));
      }
    });
}
