import { type Backend, type Recurrence, type RecurringJobs, UnsupportedError, hasRecurringJobs } from "@switchyard/core";
import { callerClock } from "../caller-clock.js";
import { cjsonArg, luaList, luaNumber, qlessError, recurArgs, required } from "./qless-args.js";
import type { Handler, TranslatedNotes } from "./qless-jobs.js";
import type { QlessSettings } from "./qless-settings.js";

/**
 * qless's recurring jobs (`recur`, `recur.get`, `recur.update`, `recur.tag`, `recur.untag`,
 * `unrecur`) on a store that is not qless: the definitions live in the store (core's RecurringJobs),
 * and each `pop` or `peek` of a queue first adds the instances that are due, as queue.lua's
 * check_recurring does: `<jid>-<n>`, put at the time it was due, with the definition's class, data,
 * priority, tags and retries. Instances are named by their count, so two gateways adding the same one
 * at once make one job (the second enqueue finds the id taken) and one of them advances the count.
 */

/** The fields qless keeps of a recurring job beside what core's Recurrence says, in `native.qless`. */
interface QlessRecurFields {
  /** The data as its client spelled it (qless gives back the text it was given). */
  data?: string;
  /** The interval in seconds as given: `intervalMs / 1000` is not always that number again. */
  interval?: number;
}

const qlessFields = (recurrence: Recurrence): QlessRecurFields => (recurrence.native.qless ?? {}) as QlessRecurFields;

/** The interval in seconds, as qless was given it. */
const intervalOf = (recurrence: Recurrence): number => qlessFields(recurrence).interval ?? recurrence.intervalMs / 1000;

/** The definition with qless's spellings of the fields it changes kept beside them. */
function withQlessFields(recurrence: Recurrence, fields: QlessRecurFields): Recurrence {
  return { ...recurrence, native: { ...recurrence.native, qless: { ...qlessFields(recurrence), ...fields } } };
}

function recurringStore(backend: Backend, queue: string, command: string): Backend & RecurringJobs {
  if (hasRecurringJobs(backend)) return backend;
  const where = queue === "" ? `the gateway's only store is ${backend.kind}` : `queue ${queue} is on ${backend.kind}`;
  throw new UnsupportedError(`qless command ${command} needs a store that keeps recurring jobs; ${where}, which does not`);
}

/**
 * A definition whose instances the store could not enqueue is refused when it is made, not at every
 * pop after: glide-mq's jobs have no tags, so a recurring job with tags has no place there.
 */
function instantiable(backend: Backend, recurrence: Recurrence, command: string): Recurrence {
  if (recurrence.tags.length > 0 && !backend.capabilities.tags) {
    throw new UnsupportedError(`qless command ${command}: queue ${recurrence.queue} is on ${backend.kind}, whose jobs have no tags`);
  }
  return recurrence;
}

/** qless's `recur.get` reply: the definition as ql:r:<jid> holds it. */
function recurView(recurrence: Recurrence): Record<string, unknown> {
  const kept = qlessFields(recurrence);
  return {
    jid: recurrence.id,
    klass: recurrence.name,
    state: "recur",
    queue: recurrence.queue,
    priority: recurrence.priority,
    interval: intervalOf(recurrence),
    retries: recurrence.maxAttempts - 1,
    count: recurrence.count,
    data: kept.data ?? JSON.stringify(recurrence.data),
    tags: luaList(recurrence.tags),
    backlog: recurrence.backlog,
  };
}

/** The recurring job `jid`, once the caller may reach its queue; qless's `missing` words when there is none. */
async function existingRecurrence(store: RecurringJobs, jid: string, missing: string, notes: TranslatedNotes): Promise<Recurrence> {
  const recurrence = await store.recurrence(jid);
  if (!recurrence) throw qlessError("recur", missing);
  notes.mayReach?.(recurrence.queue);
  return recurrence;
}

/** What each `recur.update` key does to a definition, checked as recurring.lua checks it. */
function updated(recurrence: Recurrence, key: string, value: string, notes: TranslatedNotes): Recurrence {
  const number = () => luaNumber("recur.update", value, () => `Recur(): Arg "${key}" must be a number: ${value}`);
  switch (key) {
    case "priority":
      return { ...recurrence, priority: number() };
    case "retries":
      return { ...recurrence, maxAttempts: number() + 1 };
    case "interval": {
      // qless moves the next run by the change of interval (ZINCRBY), not to now + interval.
      const next = number();
      const nextAt = recurrence.nextAt + (next - intervalOf(recurrence)) * 1000;
      return withQlessFields({ ...recurrence, intervalMs: next * 1000, nextAt }, { interval: next });
    }
    case "data":
      return withQlessFields(
        {
          ...recurrence,
          data: cjsonArg("recur.update", value, 'Recur(): Arg "data"', `Recur(): Arg "data" is not JSON-encoded: ${value}`),
        },
        { data: value },
      );
    case "klass":
      return { ...recurrence, name: value };
    case "queue":
      notes.mayReach?.(value);
      return { ...recurrence, queue: value };
    case "backlog":
      return { ...recurrence, backlog: luaNumber("recur.update", value, () => `Recur(): Arg "backlog" not a number: ${value}`) };
    default:
      throw qlessError("recur.update", `Recur(): Unrecognized option "${key}"`);
  }
}

export const RECURRING_COMMANDS: Record<string, Handler> = {
  async recur(backend, queue, args, settings, notes) {
    const given = recurArgs(args);
    const store = recurringStore(backend, queue, "recur");
    const now = callerClock.now();
    // A re-recur keeps the count of instances (so names go on), and leaves the queue it was in.
    const before = await store.recurrence(given.jid);
    if (before) notes.mayReach?.(before.queue);
    const count = before?.count ?? 0;
    const recurrence: Recurrence = {
      id: given.jid,
      queue,
      name: given.klass,
      data: given.data,
      priority: given.priority,
      tags: given.tags,
      maxAttempts: given.retries + 1,
      intervalMs: given.interval * 1000,
      nextAt: now + given.offset * 1000,
      count,
      backlog: given.backlog,
      native: {},
    };
    await store.putRecurrence(
      instantiable(backend, withQlessFields(recurrence, { interval: given.interval, data: given.dataText }), "recur"),
    );
    settings.queues.put(backend, queue);
    return given.jid;
  },
  async "recur.get"(backend, queue, args, _settings, notes) {
    const jid = required("recur.get", "Recur", args, 0, "jid");
    const recurrence = await recurringStore(backend, queue, "recur.get").recurrence(jid);
    if (recurrence) notes.mayReach?.(recurrence.queue);
    return recurrence ? recurView(recurrence) : null;
  },
  async "recur.update"(backend, queue, args, settings, notes) {
    const jid = String(args[0] ?? "");
    const store = recurringStore(backend, queue, "recur.update");
    let recurrence = await existingRecurrence(store, jid, `Recur(): No recurring job ${jid}`, notes);
    for (let i = 1; i < args.length; i += 2) {
      const key = String(args[i]);
      const value = args[i + 1];
      if (value === undefined) throw qlessError("recur.update", `No value provided for ${key}`);
      recurrence = updated(recurrence, key, String(value), notes);
    }
    await store.putRecurrence(recurrence);
    settings.queues.put(backend, recurrence.queue);
    return 1;
  },
  async "recur.tag"(backend, queue, args, _settings, notes) {
    const [jid = "", ...tags] = args.map(String);
    const store = recurringStore(backend, queue, "recur.tag");
    const recurrence = await existingRecurrence(store, jid, `Tag(): Job ${jid} does not exist`, notes);
    const added = [...recurrence.tags, ...tags.filter((tag, i) => !recurrence.tags.includes(tag) && tags.indexOf(tag) === i)];
    await store.putRecurrence(instantiable(backend, { ...recurrence, tags: added }, "recur.tag"));
    return luaList(added);
  },
  async "recur.untag"(backend, queue, args, _settings, notes) {
    const [jid = "", ...tags] = args.map(String);
    const store = recurringStore(backend, queue, "recur.untag");
    const recurrence = await existingRecurrence(store, jid, `Untag(): Job ${jid} does not exist`, notes);
    const kept = recurrence.tags.filter((tag) => !tags.includes(tag));
    await store.putRecurrence({ ...recurrence, tags: kept });
    return luaList(kept);
  },
  async unrecur(backend, queue, args, _settings, notes) {
    const jid = String(args[0] ?? "");
    const store = recurringStore(backend, queue, "unrecur");
    const recurrence = await store.recurrence(jid);
    if (!recurrence) return 1;
    notes.mayReach?.(recurrence.queue);
    await store.removeRecurrence(jid);
    // qless answers true whether or not there was one (Redis's integer 1).
    return 1;
  },
};

/** The recurring jobs of `queue`, the next due first: `jobs recurring` and the count `queues` shows. */
export async function recurringJobsOf(backend: Backend, queue: string): Promise<Recurrence[]> {
  return hasRecurringJobs(backend) ? backend.recurrences(queue) : [];
}

/**
 * queue.lua's check_recurring before a pop or peek of up to `count` jobs: each due definition, the
 * soonest first, adds its instances up to now (at most `backlog` overdue ones, the older skipped),
 * until `count` are added. A paused queue adds none at a pop (qless's pop returns first), but does at a peek.
 */
export async function addDueInstances(
  backend: Backend,
  queue: string,
  count: number,
  settings: QlessSettings,
  { pop }: { pop: boolean },
): Promise<void> {
  if (count < 1 || !hasRecurringJobs(backend)) return;
  const now = callerClock.now() / 1000;
  const due = (await backend.recurrences(queue)).filter((recurrence) => recurrence.nextAt / 1000 <= now).slice(0, count);
  if (due.length === 0 || (pop && (await backend.isPaused(queue)))) return;
  let added = 0;
  for (const recurrence of due) {
    const interval = intervalOf(recurrence);
    let score = Math.floor(recurrence.nextAt / 1000);
    const overdue = (now - score) / interval;
    if (recurrence.backlog !== 0 && overdue > recurrence.backlog) score += Math.ceil(overdue - recurrence.backlog) * interval;
    let spawned = recurrence.count;
    while (score <= now && added < count) {
      spawned += 1;
      added += 1;
      await addInstance(backend, recurrence, `${recurrence.id}-${spawned}`, score, settings);
      score += interval;
    }
    await backend.advanceRecurrence(recurrence.id, recurrence.count, spawned, score * 1000);
  }
}

/** One instance, put at the time it was due (its history's `put`), as qless writes it. */
async function addInstance(
  backend: Backend,
  recurrence: Recurrence,
  jid: string,
  dueSeconds: number,
  settings: QlessSettings,
): Promise<void> {
  const input = {
    id: jid,
    name: recurrence.name,
    data: recurrence.data,
    priority: recurrence.priority,
    tags: recurrence.tags,
    maxAttempts: recurrence.maxAttempts,
    native: { qless: { spawned_from_jid: recurrence.id } },
  };
  const { created } = await callerClock.run(dueSeconds * 1000, () => backend.enqueue(recurrence.queue, input));
  if (!created) return;
  settings.queues.put(backend, recurrence.queue);
  settings.history.put(backend, recurrence.queue, jid, dueSeconds * 1000, settings.maxJobHistory(), null, qlessFields(recurrence).data);
}

/** Recurring-job commands that name only a jid: the store holding it is found by the jid (RESP door). */
export const RECUR_JID_COMMANDS = new Set(["recur.get", "recur.update", "recur.tag", "recur.untag", "unrecur"]);

/** Of the stores that keep recurring jobs, the one holding `jid`, else the first (its handlers answer qless's words for a missing one). */
export async function recurringHolder(backends: Backend[], jid: string): Promise<Backend | undefined> {
  const stores = backends.filter(hasRecurringJobs);
  for (const store of stores) if (await store.recurrence(jid)) return store;
  return stores[0];
}
