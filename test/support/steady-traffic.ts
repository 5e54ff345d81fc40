/** One answer a client got, or `hung` when none came within the deadline. */
export interface Answer {
  queue: string;
  at: number;
  ms: number;
  status: number | "hung";
  retryAfter: string | null;
  body: string;
}

export interface SteadyTraffic {
  answers: Answer[];
  /** The jobs a client got a 201 for. */
  acknowledged: Array<{ queue: string; id: string }>;
  /** How many answers with `status` came to requests sent at or after `time`, on `queue` if given. */
  since(time: number, status: number, queue?: string): number;
  /** Stops the clients and waits for their last requests. */
  stop(): Promise<void>;
}

/**
 * `clients` producers enqueueing through the native door in a loop, round robin over `queues`, each
 * request given up after `deadlineMs` (recorded as `hung`), until stopped. For fault tests that break
 * a store under load and then read what every client was told.
 */
export function steadyTraffic(
  url: string,
  queues: string[],
  { clients = 8, deadlineMs }: { clients?: number; deadlineMs: number },
): SteadyTraffic {
  const answers: Answer[] = [];
  const acknowledged: Array<{ queue: string; id: string }> = [];
  let stopped = false;
  let sent = 0;
  const client = async () => {
    while (!stopped) {
      const queue = queues[sent++ % queues.length]!;
      const at = Date.now();
      try {
        const res = await fetch(`${url}/v1/queues/${queue}/jobs`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ name: "steady", data: { at } }),
          signal: AbortSignal.timeout(deadlineMs),
        });
        const body = await res.text();
        answers.push({ queue, at, ms: Date.now() - at, status: res.status, retryAfter: res.headers.get("retry-after"), body });
        if (res.status === 201) acknowledged.push({ queue, id: (JSON.parse(body) as { job: { id: string } }).job.id });
      } catch (error) {
        if ((error as Error).name !== "TimeoutError") throw error;
        answers.push({ queue, at, ms: Date.now() - at, status: "hung", retryAfter: null, body: "" });
      }
    }
  };
  const running = Promise.all(Array.from({ length: clients }, client));
  return {
    answers,
    acknowledged,
    since: (time, status, queue) =>
      answers.filter((answer) => answer.at >= time && answer.status === status && (queue === undefined || answer.queue === queue)).length,
    stop: async () => {
      stopped = true;
      await running;
    },
  };
}
