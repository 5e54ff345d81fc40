import {
  type Backend,
  InvalidStateError,
  type Job,
  type JobState,
  LeaseLostError,
  NotFoundError,
  QlessCommandError,
  queuesToSearch,
} from "@switchyard/core";

/**
 * qless's names for job states, and its words when a worker's command finds the job not in its hands:
 * a core store refuses such a command with its own typed error, which a qless client would not
 * recognise (qless-core's tests match these words), so the translation words it as job.lua does.
 */

export const QLESS_STATE: Record<JobState, string> = {
  waiting: "waiting",
  delayed: "scheduled",
  active: "running",
  completed: "complete",
  failed: "failed",
  canceled: "canceled",
  blocked: "depends",
};

export type WorkerCommand = "Complete" | "Fail" | "Retry" | "Heartbeat";

/** job.lua's messages, spacing included (Fail's first two lack a space there too). */
const WORDS: Record<WorkerCommand, { missing: string; notRunning: string; otherWorker: string }> = {
  Complete: {
    missing: " does not exist",
    notRunning: " is not currently running: ",
    otherWorker: " has been handed out to another worker: ",
  },
  Fail: { missing: "does not exist", notRunning: "not currently running: ", otherWorker: " running with another worker: " },
  Retry: { missing: " does not exist", notRunning: " is not currently running: ", otherWorker: " has been given to another worker: " },
  Heartbeat: { missing: " does not exist", notRunning: " not currently running: ", otherWorker: " given out to another worker: " },
};

/** job.lua's refusal of a worker's command on a job in a state other than running (`stalled` after a timeout). */
export function notRunning(command: WorkerCommand, jid: string, state: string): QlessCommandError {
  return new QlessCommandError(command.toLowerCase(), `${command}(): Job ${jid}${WORDS[command].notRunning}${state}`);
}

/**
 * The job under `jid` in `queue`; for Complete, which names a queue qless checks, also in another
 * queue, where a job this one left behind canceled (a put moved it) lives on.
 */
async function findJob(backend: Backend, queue: string, jid: string, command: WorkerCommand): Promise<Job | null> {
  const job = await backend.get(queue, jid);
  if (command !== "Complete" || (job && job.state !== "canceled")) return job;
  for (const other of await queuesToSearch(backend, jid)) {
    const found = other === queue ? null : await backend.get(other, jid);
    if (found && found.state !== "canceled") return found;
  }
  return job;
}

/**
 * Runs a worker's command; when the store refuses it because the job is missing, not running, or held
 * by another worker, answers qless's error for it, checked in job.lua's order. `stateOf` names a
 * job's state as qless would (the store's, unless the gateway knows better: see qlessStateOf).
 */
export async function asWorker<T>(
  backend: Backend,
  queue: string,
  command: WorkerCommand,
  jid: string,
  worker: string,
  run: () => Promise<T>,
  stateOf: (job: Job) => string = (job) => QLESS_STATE[job.state],
): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (!(error instanceof NotFoundError || error instanceof LeaseLostError || error instanceof InvalidStateError)) throw error;
    const job = await findJob(backend, queue, jid, command);
    const words = WORDS[command];
    const refuse = (text: string) => new QlessCommandError(command.toLowerCase(), `${command}(): Job ${jid}${text}`, { cause: error });
    // qless forgets a canceled job.
    if (!job || job.state === "canceled") throw refuse(words.missing);
    if (job.state !== "active") throw refuse(`${words.notRunning}${stateOf(job)}`);
    const holder = job.lease?.worker ?? "";
    if (holder !== worker) throw refuse(`${words.otherWorker}${holder}`);
    if (job.queue !== queue) throw refuse(` running in another queue: ${job.queue}`);
    // Held by this worker after all (a lease that expired meanwhile): the store's own reason stands.
    throw error;
  }
}
