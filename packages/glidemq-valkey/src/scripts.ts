import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type LuaScript, luaScript, runLuaScript } from "@switchyard/core";
import type { Cluster, Redis } from "ioredis";

/** A Redis or Redis Cluster client of ioredis; every key of a call shares one hash tag. */
export type RedisClient = Redis | Cluster;

export type ScriptName =
  | "add"
  | "activate"
  | "reserve"
  | "complete"
  | "complete-many"
  | "complete-reserve-many"
  | "fail"
  | "promote"
  | "reclaim-stalled"
  | "reclaim-stalled-list"
  | "heartbeat"
  | "revoke"
  | "pause"
  | "import"
  | "load-jobs"
  | "export-page"
  | "flow"
  | "flow-tree"
  | "count-prioritized"
  | "change-priority"
  | "change-delay"
  | "promote-job"
  | "clean"
  | "retry-failed"
  | "drain"
  | "index-blocked"
  | "remove"
  | "remove-scheduler"
  | "write-schedulers"
  | "signal"
  | "broadcast-deliver"
  | "flow-dag"
  | "advance-recurrence";

function luaDir(): string {
  // Next to this module in the sources; from dist, the package ships src/lua as well.
  const here = fileURLToPath(new URL("./lua/", import.meta.url));
  return existsSync(here) ? here : fileURLToPath(new URL("../src/lua/", import.meta.url));
}

const cache = new Map<ScriptName, LuaScript>();
/** Helpers prepended to every operation, in dependency order. */
const LIBRARY = ["core.lua", "claim.lua", "dependencies.lua", "create.lua", "complete.lua", "reserve.lua"];

/** The script text: the lib/ helpers, then the operation. Run by EVALSHA; no server function names. */
export function script(name: ScriptName): LuaScript {
  let loaded = cache.get(name);
  if (!loaded) {
    const dir = luaDir();
    const helpers = LIBRARY.map((file) => readFileSync(`${dir}lib/${file}`, "utf8"));
    const source = `${helpers.join("\n")}\n${readFileSync(`${dir}${name}.lua`, "utf8")}`;
    loaded = luaScript(source);
    cache.set(name, loaded);
  }
  return loaded;
}

const ALL: ScriptName[] = [
  "add",
  "activate",
  "reserve",
  "complete",
  "complete-many",
  "complete-reserve-many",
  "fail",
  "promote",
  "reclaim-stalled",
  "reclaim-stalled-list",
  "heartbeat",
  "revoke",
  "pause",
  "import",
  "load-jobs",
  "export-page",
  "flow",
  "flow-tree",
  "count-prioritized",
  "change-priority",
  "change-delay",
  "promote-job",
  "clean",
  "retry-failed",
  "drain",
  "index-blocked",
  "remove",
  "remove-scheduler",
  "write-schedulers",
  "signal",
  "broadcast-deliver",
  "flow-dag",
  "advance-recurrence",
];

function isCluster(client: RedisClient): client is Cluster {
  return "nodes" in client && typeof (client as Cluster).nodes === "function" && (client as Cluster).isCluster === true;
}

/** SCRIPT LOAD on every primary, so that EVALSHA (alone or inside MULTI) finds the scripts. */
export async function loadScripts(client: RedisClient): Promise<void> {
  const nodes: Redis[] = isCluster(client) ? client.nodes("master") : [client as Redis];
  await Promise.all(nodes.flatMap((node) => ALL.map((name) => node.script("LOAD", script(name).source))));
}

/** One operation's script, by EVALSHA (EVAL if the server lost its script cache). */
export function runScript(client: RedisClient, name: ScriptName, keys: string[], args: Array<string | number>): Promise<unknown> {
  return runLuaScript(client, script(name), keys, args);
}

export { isCluster };
