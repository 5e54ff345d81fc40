import type { Backend } from "@switchyard/core";
import { ScopedStorage } from "../scoped-storage.js";
import type { QlessTracked } from "./qless-state.js";

/**
 * qless's pub/sub for stores that are not qless-redis. qless's script publishes as it runs
 * (`Qless.publish`): every move on `ql:log` in its own words (who failed a job, with what group and
 * message; who held a canceled one; lock_lost; config_set), the jid of a tracked job on `ql:<event>`
 * (`ql:put`, `ql:popped`, `ql:completed`, `ql:failed`, `ql:canceled`, `ql:stalled`), a note to the
 * worker that lost a job on `ql:w:<worker>`, and `ql:track`/`ql:untrack`. The translated commands
 * publish the same messages here, in the script's order; the RESP door tells its subscribers. One hub
 * per gateway process: what other gateways' qless commands publish is not heard here (their moves
 * still reach `ql:log` through the event stream, in the event stream's fewer words).
 */

export type QlessListener = (channel: string, message: string, queue: string | undefined) => void;

/** Set while a translated qless command runs, so the job events its store calls raise are known as its own. */
const translating = new ScopedStorage<true>();

export class QlessChannels {
  readonly #listeners = new Set<QlessListener>();

  /** `tracked`: the jobs whose moves are also told on `ql:<event>` (qless's `ql:tracked`). */
  constructor(private readonly tracked: QlessTracked) {}

  /** `queue` is the queue the message is about (a token limited to some queues hears only theirs); none for settings. */
  publish(channel: string, message: string, queue?: string): void {
    for (const listener of this.#listeners) listener(channel, message, queue);
  }

  subscribe(listener: QlessListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Runs a translated command, which publishes its moves itself (see `inCommand`). */
  translating<T>(work: () => Promise<T>): Promise<T> {
    return translating.run(true, work);
  }

  /**
   * Whether the code running now is a translated qless command: a job event raised by its store calls
   * is then told by the command's own messages, and must not reach `ql:log` a second time.
   */
  static get inCommand(): boolean {
    return translating.getStore() === true;
  }

  /** The jid of a tracked job on `ql:<event>`, as qless publishes it for jobs in `ql:tracked`. */
  tellTracked(backend: Backend, queue: string, jid: string, event: string): void {
    if (this.tracked.has(backend, queue, jid)) this.publish(`ql:${event}`, jid, queue);
  }

  /** A worker lost its lock on a job (timed out, taken by a re-put, run out): to it, then to the log. */
  lockLost(queue: string, jid: string, worker: string): void {
    const message = qlessLog.lockLost(jid, worker);
    this.publish(`ql:w:${worker}`, message, queue);
    this.publish("ql:log", message, queue);
  }
}

/** Text as lua-cjson writes it: JSON, with `/` escaped as `\/` (only strings hold a `/`). */
const cjson = (fields: Record<string, string>) => JSON.stringify(fields).replace(/\//g, "\\/");

/** qless's `ql:log` messages, their keys in the order cjson writes qless's tables (the order clients see). */
export const qlessLog = {
  put: (jid: string, queue: string) => cjson({ jid, event: "put", queue }),
  completed: (jid: string, queue: string) => cjson({ jid, event: "completed", queue }),
  advanced: (jid: string, queue: string, to: string) => cjson({ jid, to, event: "advanced", queue }),
  canceled: (jid: string, queue: string, worker: string) => cjson({ jid, queue, event: "canceled", worker }),
  failed: (jid: string, worker: string, group: string, message: string) => cjson({ message, jid, group, event: "failed", worker }),
  lockLost: (jid: string, worker: string) => cjson({ jid, event: "lock_lost", worker }),
  configSet: (option: string, value: string) => cjson({ option, event: "config_set", value }),
  configUnset: (option: string) => cjson({ event: "config_unset", option }),
};
