import { type EnqueueInput, type Job, type Json, QlessCommandError } from "@switchyard/core";
import { BeyondJsonError, cjsonDecode } from "./cjson.js";

/**
 * A qless command's arguments as qless's script reads them, and the Lua and Redis idioms of its
 * replies and refusals, for the commands translated onto other stores (qless-translate.ts).
 */

/** qless `put` without `retries`: 5 retries, so 6 runs. */
const DEFAULT_RETRIES = 5;

export type Arg = string | number;
export type QlessArgs = Arg[];

/** cjson encodes an empty Lua table as `{}`; qless clients expect that for empty lists. */
export const luaList = <T>(items: T[]): T[] | Record<string, never> => (items.length > 0 ? items : {});
export const seconds = (ms: number) => Math.floor(ms / 1000);

export function qlessError(command: string, message: string): QlessCommandError {
  return new QlessCommandError(command, message);
}

export function required(command: string, func: string, args: QlessArgs, index: number, name: string): string {
  const value = args[index];
  if (value === undefined || value === "") throw qlessError(command, `${func}(): Arg "${name}" missing`);
  return String(value);
}

/**
 * A number argument, refused in qless's words: `<Func>(): Arg "<name>" not a number: <value>`, or, for
 * the arguments qless asserts as required (pop's and peek's count, priority's priority), `missing or
 * not a number`.
 */
export function numeric(command: string, func: string, value: Arg | undefined, name: string, required = false): number {
  const number = typeof value === "number" ? value : value === undefined || value.trim() === "" ? Number.NaN : Number(value);
  const problem = required ? "missing or not a number" : "not a number";
  if (!Number.isFinite(number)) throw qlessError(command, `${func}(): Arg "${name}" ${problem}: ${value ?? "nil"}`);
  return number;
}

/**
 * A JSON argument decoded as qless.lua decodes it, `cjson.decode(value)`: refused in cjson's words
 * when it is not JSON (or not given). `what` names it (`Put(): Arg "data"`) where the number cjson
 * took is one JSON, and so the store, cannot hold (inf, nan).
 */
function decodeArg(command: string, value: Arg | undefined, what: string): Json {
  if (value === undefined) throw qlessError(command, "bad argument #1 to 'decode' (string expected, got nil)");
  try {
    return cjsonDecode(String(value));
  } catch (error) {
    if (error instanceof BeyondJsonError) throw qlessError(command, `${what} holds ${error.message}`);
    throw qlessError(command, (error as Error).message);
  }
}

/** `assert(cjson.decode(value), message)`: as decodeArg, and refused with qless's `message` when it is `false`. */
export function cjsonArg(command: string, value: Arg | undefined, what: string, message: string): Json {
  const decoded = decodeArg(command, value, what);
  if (decoded === false) throw qlessError(command, message);
  return decoded;
}

/** The data a worker sends with heartbeat or fail: none when not given or `false` (qless skips it then), refused in cjson's words when not JSON. */
export function workerData(command: string, func: string, value: Arg | undefined): Json | undefined {
  const data = value === undefined ? undefined : decodeArg(command, value, `${func}(): Arg "data"`);
  return data === false ? undefined : data;
}

/**
 * A JSON list of names (tags, jids). qless concatenates each into its keys (`ql:t:` .. tag), so a
 * number is the name Lua's tostring gives it (`1`, `1.5`, `1e+20`); anything else is refused.
 */
function nameList(command: string, func: string, value: Arg | undefined, name: string, falseMessage: string): string[] {
  const parsed = cjsonArg(command, value, `${func}(): Arg "${name}"`, falseMessage);
  // cjson decodes `{}` (an empty list as qless writes it) to an empty table.
  if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) && Object.keys(parsed).length === 0) return [];
  if (!Array.isArray(parsed) || !parsed.every((item) => typeof item === "string" || typeof item === "number")) {
    throw qlessError(command, `${func}(): Arg "${name}" not a JSON array of strings or numbers: ${value}`);
  }
  return parsed.map((item) => (typeof item === "number" ? luaNumberText(item) : item));
}

let tableAddress = 0x5555_5555_0000;
/** A Lua table as `tostring` prints it (qless prints its argument table in one error): an address, new each time. */
function luaTableText(): string {
  tableAddress += 0x40;
  return `table: 0x${tableAddress.toString(16)}`;
}

/** A number as Lua 5.1 turns it into text (`%.14g`). */
export function luaNumberText(value: number): string {
  const [mantissa = "0", exponent = "0"] = value.toExponential(13).split("e");
  const power = Number(exponent);
  const trim = (digits: string) => (digits.includes(".") ? digits.replace(/\.?0+$/, "") : digits);
  if (power < -4 || power >= 14) return `${trim(mantissa)}e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
  return trim(value.toFixed(Math.max(0, 13 - power)));
}

/**
 * `put worker queue jid klass data delay [priority p] [tags JSON] [retries n] [depends JSON]` as an
 * EnqueueInput. `before` is the job the jid names already: qless's put keeps its priority, tags and
 * retries where the put does not give them.
 */
export function putInput(args: QlessArgs, before: Job | null = null): EnqueueInput {
  const jid = required("put", "Put", args, 2, "jid");
  const klass = required("put", "Put", args, 3, "klass");
  const data = cjsonArg("put", args[4], 'Put(): Arg "data"', `Put(): Arg "data" missing or not JSON: ${args[4]}`);
  const delay = numeric("put", "Put", args[5] ?? 0, "delay");
  const rest = args.slice(6);
  if (rest.length % 2 === 1) throw qlessError("put", `Odd number of additional args: ${luaTableText()}`);
  // As qless reads them into a table: an option given twice takes its last value.
  const options = new Map<string, Arg | undefined>();
  for (let i = 0; i < rest.length; i += 2) options.set(String(rest[i]), rest[i + 1]);
  const option = <T>(key: string, parse: (value: Arg | undefined) => T, kept: T): T => (options.has(key) ? parse(options.get(key)) : kept);
  const retries = option("retries", (value) => numeric("put", "Put", value, "retries"), (before?.maxAttempts ?? DEFAULT_RETRIES + 1) - 1);
  // qless's own message for tags has no colon: `Put(): Arg "tags" not JSONfalse`.
  const tags = option("tags", (value) => nameList("put", "Put", value, "tags", `Put(): Arg "tags" not JSON${value}`), before?.tags ?? []);
  // As tags', qless's message for priority has no colon: `Put(): Arg "priority" not a numberhigh`.
  const priority = option(
    "priority",
    (value) => luaNumber("put", value ?? "", () => `Put(): Arg "priority" not a number${value ?? "nil"}`),
    before?.priority ?? 0,
  );
  const depends = option("depends", (value) => nameList("put", "Put", value, "depends", `Put(): Arg "depends" not JSON: ${value}`), []);
  const input: EnqueueInput = { id: jid, name: klass, data, maxAttempts: retries + 1 };
  if (delay > 0) input.delay = Math.round(delay * 1000);
  // Clients send every option with its default (qless-py: priority 0, tags [], depends []); only
  // non-defaults reach the backend, so a backend without tags still takes a plain put.
  if (priority !== 0) input.priority = priority;
  if (tags.length > 0) input.tags = tags;
  if (depends.length > 0) input.dependsOn = depends;
  return input;
}

/** What `complete <jid> <worker> <queue> <data> [next <queue> [delay <s>] [depends <jids>]]` asks beyond a completion. */
export interface Advance {
  next: string;
  /** Seconds to wait in the next queue (0: none). */
  delay: number;
  depends: string[];
}

/**
 * The data and options of a qless `complete`, checked in job.lua's order: the data is decoded first
 * (cjson's words when it is not JSON or not given), then `delay` (a bare `assertion failed!` when not
 * a number) and `depends`; the job moves on to `next` when it is given (advance null: a plain
 * completion); `delay` or `depends` without `next` is qless's error.
 */
export function completeOptions(args: QlessArgs): { data: Json; advance: Advance | null } {
  const data = cjsonArg("complete", args[3], 'Complete(): Arg "data"', `Complete(): Arg "data" missing or not JSON: ${args[3]}`);
  // As Lua reads them into a table: an option given twice takes its last value, a key without one is nil.
  const rest = args.slice(4);
  const options = new Map<string, Arg>();
  for (let i = 0; i < rest.length; i += 2) if (rest[i + 1] !== undefined) options.set(String(rest[i]), rest[i + 1] as Arg);
  const given = (option: string) => options.get(option);
  const delay = options.has("delay") ? luaNumber("complete", given("delay") as Arg, () => "assertion failed!") : 0;
  const depends = options.has("depends")
    ? nameList("complete", "Complete", given("depends"), "depends", `Complete(): Arg "depends" not JSON: ${given("depends")}`)
    : [];
  const next = given("next");
  for (const option of ["delay", "depends"])
    if (options.has(option) && next === undefined) throw qlessError("complete", `Complete(): "${option}" cannot be used without a "next".`);
  return { data, advance: next === undefined ? null : { next: String(next), delay, depends } };
}

/**
 * The argument checks qless.lua makes before it reads the job a command names, in its order, so that
 * a command is refused for its arguments first whether or not a store holds its jid.
 */
export function checkJobArgs(command: string, args: QlessArgs): void {
  const func = command.charAt(0).toUpperCase() + command.slice(1);
  const need = (index: number, name: string, as = func) => required(command, as, args, index, name);
  switch (command) {
    case "complete":
      need(1, "worker");
      need(2, "queue");
      completeOptions(args);
      return;
    case "fail":
      need(1, "worker");
      need(2, "group");
      need(3, "message");
      workerData(command, func, args[4]);
      return;
    case "heartbeat":
      // qless's own message has the typo: "Heatbeat(): Arg "worker" missing".
      need(1, "worker", "Heatbeat");
      workerData(command, func, args[2]);
      return;
    case "retry":
      need(1, "queue");
      need(2, "worker");
      numeric(command, func, args[3] ?? 0, "delay");
      return;
    case "priority":
      numeric(command, func, args[1], "priority", true);
      return;
    case "depends":
      need(1, "command");
      return;
    case "recur":
      recurArgs(args);
      return;
  }
}

/** A `recur` as qless reads it; an option not given takes qless's default (no tags, 0 otherwise), a re-`recur` too. */
export interface RecurArgs {
  jid: string;
  klass: string;
  data: Json;
  /** The data as the client spelled it, which qless keeps and gives back. */
  dataText: string;
  interval: number;
  offset: number;
  tags: string[];
  priority: number;
  retries: number;
  backlog: number;
}

/** `recur queue jid klass data interval <interval> <offset> [options]`, checked in queue.lua's order. */
export function recurArgs(args: QlessArgs): RecurArgs {
  const [, jid, klass, dataText, spec, interval, offset] = args;
  for (const [value, name] of [
    [jid, "jid"],
    [klass, "klass"],
    [spec, "spec"],
  ] as const)
    if (value === undefined) throw qlessError("recur", `RecurringJob On(): Arg "${name}" missing`);
  const data = cjsonArg("recur", dataText, 'RecurringJob On(): Arg "data"', `RecurringJob On(): Arg "data" not JSON: ${dataText}`);
  if (spec !== "interval") throw qlessError("recur", `Recur(): schedule type "${spec}" unknown`);
  const number = (value: Arg | undefined, name: string) =>
    luaNumber("recur", value ?? "", () => `Recur(): Arg "${name}" not a number: ${value ?? "nil"}`);
  const every = number(interval, "interval");
  if (every <= 0) throw qlessError("recur", 'Recur(): Arg "interval" must be greater than 0');
  const after = number(offset, "offset");
  const rest = args.slice(7);
  if (rest.length % 2 === 1) throw qlessError("recur", `Odd number of additional args: ${luaTableText()}`);
  const options = new Map<string, Arg | undefined>();
  for (let i = 0; i < rest.length; i += 2) options.set(String(rest[i]), rest[i + 1]);
  const tagsText = options.get("tags");
  const tags = options.has("tags")
    ? nameList("recur", "Recur", tagsText, "tags", `Recur(): Arg "tags" must be JSON string array: ${tagsText}`)
    : [];
  const [priority, retries, backlog] = ["priority", "retries", "backlog"].map((name) =>
    options.has(name) ? number(options.get(name), name) : 0,
  ) as [number, number, number];
  return {
    jid: String(jid),
    klass: String(klass),
    data,
    dataText: String(dataText),
    interval: every,
    offset: after,
    tags,
    priority,
    retries,
    backlog,
  };
}

/** Redis's refusal of a command qless calls with no members (`pause`, `unpause`, `worker.deregister` given nothing). */
export const wrongArgs = (command: string) => qlessError(command, "Wrong number of args calling Redis command from script");

/** Lua's `tonumber` of an argument, or the error `message()` names. */
export function luaNumber(command: string, value: Arg, message: () => string): number {
  const number = typeof value === "number" ? value : value.trim() === "" ? Number.NaN : Number(value);
  if (!Number.isFinite(number)) throw qlessError(command, message());
  return number;
}

/** Redis's LRANGE on a list: inclusive indexes, negative ones counted from the end. */
export function listRange<T>(list: T[], start: number, stop: number): T[] {
  const from = start < 0 ? Math.max(0, list.length + start) : start;
  const to = stop < 0 ? list.length + stop : Math.min(stop, list.length - 1);
  return from > to ? [] : list.slice(from, to + 1);
}

/** qless's `offset` and `count` arguments (default 0 and 25). */
export function page(command: string, func: string, offset: Arg | undefined, count: Arg | undefined): [number, number] {
  return [Math.max(0, numeric(command, func, offset ?? 0, "offset")), Math.max(0, numeric(command, func, count ?? 25, "count"))];
}
