import { QlessCommandError } from "@switchyard/core";
import { QlessChannels, qlessLog } from "./qless-channels.js";
import { QlessHistory } from "./qless-history.js";
import {
  QlessCompleted,
  QlessGrace,
  QlessPromotions,
  QlessQueues,
  QlessRuns,
  QlessTagDrift,
  QlessTimeouts,
  QlessTracked,
  QlessWorkers,
} from "./qless-state.js";
import { QlessStats } from "./qless-stats.js";

/** qless's own defaults (qless-core's Qless.config.defaults), answered until a setting is made. */
const QLESS_DEFAULTS: Readonly<Record<string, string | number>> = {
  application: "qless",
  heartbeat: 60,
  "grace-period": 10,
  "stats-history": 30,
  "histogram-history": 7,
  "jobs-history-count": 50000,
  "jobs-history": 604800,
};

export const QLESS_CONFIG_COMMANDS = ["config.get", "config.set", "config.unset"] as const;

/**
 * qless's settings (`config.get`, `config.set`, `config.unset`; the `ql:config` hash of a qless
 * store) for queues whose store is not qless-redis. The gateway keeps them, one set per gateway
 * process: they are not shared with other gateways and not kept across a restart, since a SQL, Mongo
 * or glide-mq store has no place for them. They are read where qless reads them to run jobs: the
 * lock a `pop` gives and a `heartbeat` renews lasts `<queue>-heartbeat`, else `heartbeat`, seconds
 * (negative: run out when given); a lock that ran out gets `grace-period` seconds more at the next
 * pop before the job is handed out again; `<queue>-max-concurrency` caps a queue's running jobs;
 * `jobs-history-count` and `jobs-history` bound the completed jobs kept (qless-locks.ts,
 * qless-translate.ts). The others are kept and answered (`max-worker-age` is read by `workers`).
 */
export class QlessSettings {
  readonly #set = new Map<string, string>();
  /** qless's other global state, kept beside its settings for the same stores (qless-state.ts). */
  readonly tracked = new QlessTracked();
  readonly workers = new QlessWorkers();
  readonly timeouts = new QlessTimeouts();
  readonly grace = new QlessGrace();
  readonly completed = new QlessCompleted();
  readonly runs = new QlessRuns();
  readonly queues = new QlessQueues();
  readonly promotions = new QlessPromotions();
  readonly history = new QlessHistory();
  readonly stats = new QlessStats();
  readonly tagDrift = new QlessTagDrift();
  /** qless's pub/sub: what the translated commands publish (qless-channels.ts). */
  readonly channels = new QlessChannels(this.tracked);

  /** How long a worker not seen stays listed by `workers`: qless's `max-worker-age` (a day), in milliseconds. */
  maxWorkerAgeMs(): number {
    const seconds = Number(this.#value("max-worker-age") ?? 86400);
    return (Number.isFinite(seconds) ? seconds : 86400) * 1000;
  }

  /**
   * How long a qless lock on a job of `queue` lasts, in milliseconds: qless's `now + heartbeat`, so zero
   * or less gives a lock that has run out already (qless-core's own tests set `heartbeat` to -10).
   */
  lockMs(queue: string): number {
    return Math.round(this.#number(this.#value(`${queue}-heartbeat`) ?? this.#value("heartbeat"), "heartbeat") * 1000);
  }

  /** How long a lock that ran out is left to its worker after the courtesy lock_lost, in ms; 0 or less: none. */
  graceMs(): number {
    return Math.round(this.#number(this.#value("grace-period"), "grace-period") * 1000);
  }

  /** At most how many jobs of `queue` run at once (`<queue>-max-concurrency`); 0: no limit. */
  maxConcurrency(queue: string): number {
    const limit = Number(this.#value(`${queue}-max-concurrency`) ?? 0);
    return Number.isFinite(limit) && limit > 0 ? Math.floor(limit) : 0;
  }

  /** How many entries of a job's history qless keeps (`max-job-history`, 100 when unset); 0 or less: all. */
  maxJobHistory(): number {
    const count = Number(this.#value("max-job-history") ?? 100);
    return Number.isFinite(count) ? Math.floor(count) : 100;
  }

  /** How many completed jobs qless keeps (`jobs-history-count`), and for how long (`jobs-history`, ms). */
  jobsHistory(): { count: number; ms: number } {
    return {
      count: Math.floor(this.#number(this.#value("jobs-history-count"), "jobs-history-count")),
      ms: Math.round(this.#number(this.#value("jobs-history"), "jobs-history") * 1000),
    };
  }

  /** One `config.*` command, answered as qless's script answers it. */
  run(command: string, args: Array<string | number>): unknown {
    const [option, value] = args.map(String);
    if (command === "config.get") {
      if (option === undefined) return { ...QLESS_DEFAULTS, ...Object.fromEntries(this.#set) };
      return this.#value(option) ?? null;
    }
    if (option === undefined) throw new QlessCommandError(command, `${command}(): Arg "option" missing`);
    if (command === "config.unset") {
      this.channels.publish("ql:log", qlessLog.configUnset(option));
      this.#set.delete(option);
      return null;
    }
    if (value === undefined) throw new QlessCommandError(command, `config.set(): Arg "value" missing`);
    this.channels.publish("ql:log", qlessLog.configSet(option, value));
    this.#set.set(option, value);
    return null;
  }

  #value(option: string): string | number | undefined {
    return this.#set.get(option) ?? QLESS_DEFAULTS[option];
  }

  /** A setting as a number; one that is not (qless's `tonumber` would give nil and the script fail) reads as qless's default. */
  #number(value: string | number | undefined, option: string): number {
    const number = Number(value);
    return value !== undefined && value !== "" && Number.isFinite(number) ? number : Number(QLESS_DEFAULTS[option]);
  }
}
