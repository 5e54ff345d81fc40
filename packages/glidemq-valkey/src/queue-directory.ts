import { KeyspaceWalk, type Walked } from "./keyspace-walk.js";

/**
 * The names of the queues in the keyspace, shared by everything in one backend that needs them:
 * queues(), the look-ups of the queues holding a jid, and the event feed's discovery. glide-mq keeps
 * no list of its queues, so they come from a KeyspaceWalk. Each reader used to walk on its own
 * schedule (/metrics and the dashboard's overview every 15 s each, the look-ups every 10 s, the feed
 * every 30 s): with counts() finding flow parents (flow-parents.ts), a gateway on a Redis of a million
 * job hashes spent 14 s of Redis's CPU a minute on walks (`npm run bench -- large-keyspace`). A queue
 * this backend writes jobs to is named at once (`wrote`), as a fresh walk would name it.
 */
export class QueueDirectory {
  readonly #walk: KeyspaceWalk<ReadonlySet<string>>;
  /** Queues written to that the last walk did not name, with when: a walk begun later names them itself. */
  readonly #written = new Map<string, number>();
  /** What names() answers, kept while nothing changes: the same array, which readers may key their own work on. */
  #answer: { from: Walked<ReadonlySet<string>>; names: string[]; named: ReadonlySet<string> } | null = null;

  constructor(
    walk: () => Promise<string[]>,
    private readonly clock: () => number = Date.now,
  ) {
    this.#walk = new KeyspaceWalk(async () => new Set(await walk()), clock);
  }

  /** The queue names, in name order: the walk's and those written to since; the same array while they stay the same. */
  async names(): Promise<readonly string[]> {
    const walked = await this.#walk.read();
    if (this.#answer?.from === walked) return this.#answer.names;
    // What was written before the walk began, the walk saw (or it has gone since).
    for (const [queue, at] of this.#written) if (at < walked.startedAt || walked.found.has(queue)) this.#written.delete(queue);
    const names = [...new Set([...walked.found, ...this.#written.keys()])].sort();
    this.#answer = { from: walked, names, named: new Set(names) };
    return names;
  }

  /** Notes a queue this backend writes jobs to, so that it is named before the next walk. */
  wrote(queue: string): void {
    if (this.#answer?.named.has(queue) || this.#written.has(queue)) return;
    this.#written.set(queue, this.clock());
    this.#answer = null;
  }
}
