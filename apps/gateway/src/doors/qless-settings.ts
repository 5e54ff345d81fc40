import { QlessCommandError } from "@switchyard/core";
import { QlessTimeouts, QlessTracked, QlessWorkers } from "./qless-state.js";

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
 * lock a `pop` gives and a `heartbeat` renews lasts `<queue>-heartbeat`, else `heartbeat`, seconds.
 * The other settings (grace-period, history lengths) are kept and answered, and change nothing.
 */
export class QlessSettings {
  readonly #set = new Map<string, string>();
  /** qless's other global state, kept beside its settings for the same stores (qless-state.ts). */
  readonly tracked = new QlessTracked();
  readonly workers = new QlessWorkers();
  readonly timeouts = new QlessTimeouts();

  /** How long a worker not seen stays listed by `workers`: qless's `max-worker-age` (a day), in milliseconds. */
  maxWorkerAgeMs(): number {
    const seconds = Number(this.#value("max-worker-age") ?? 86400);
    return (Number.isFinite(seconds) ? seconds : 86400) * 1000;
  }

  /** How long a qless lock on a job of `queue` lasts, in milliseconds. */
  lockMs(queue: string): number {
    const seconds = Number(this.#value(`${queue}-heartbeat`) ?? this.#value("heartbeat"));
    return (Number.isFinite(seconds) && seconds > 0 ? seconds : Number(QLESS_DEFAULTS.heartbeat)) * 1000;
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
      this.#set.delete(option);
      return null;
    }
    if (value === undefined) throw new QlessCommandError(command, `config.set(): Arg "value" missing`);
    this.#set.set(option, value);
    return null;
  }

  #value(option: string): string | number | undefined {
    return this.#set.get(option) ?? QLESS_DEFAULTS[option];
  }
}
