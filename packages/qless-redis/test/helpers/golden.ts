import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { QlessReply } from "@switchyard/core";
import type { Redis } from "ioredis";
import { callQlessRaw } from "../../src/script.js";
import { type DumpedKey, dumpKeys } from "./key-dump.js";

/** The traces recorded from the real qless-core script on Redis 7.0.15 (see their README). */
export const GOLDEN_DIR = join(import.meta.dirname, "../../../../../shared/golden/qless");

export interface GoldenStep {
  call: string[];
  reply?: QlessReply;
  error?: string;
  published: [string, string][];
  keys: Record<string, DumpedKey>;
}

export interface GoldenScenario {
  file: string;
  scenario: string;
  steps: GoldenStep[];
}

export function loadScenarios(): GoldenScenario[] {
  return readdirSync(GOLDEN_DIR)
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((file) => ({ file, ...JSON.parse(readFileSync(join(GOLDEN_DIR, file), "utf8")) }));
}

/** Job JSON reads dependencies/dependents from Redis sets, whose order is undefined. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) {
      const normal = canonical(inner);
      out[key] = (key === "dependencies" || key === "dependents") && Array.isArray(normal) ? [...normal].sort() : normal;
    }
    return out;
  }
  return value;
}

function parsed(text: string): unknown {
  try {
    return canonical(JSON.parse(text));
  } catch {
    return undefined;
  }
}

/** Equal as text, or (where JSON is involved) equal as parsed structures. */
export function sameText(expected: string, actual: string): boolean {
  if (expected === actual) return true;
  const a = parsed(expected);
  return a !== undefined && JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(parsed(actual)));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sortKeys((value as Record<string, unknown>)[key])]),
    );
  }
  return value;
}

function sameReply(expected: QlessReply | undefined, actual: QlessReply): boolean {
  if (typeof expected === "string" && typeof actual === "string") return sameText(expected, actual);
  if (Array.isArray(expected) && Array.isArray(actual)) {
    return expected.length === actual.length && expected.every((item, i) => sameReply(item, actual[i] as QlessReply));
  }
  return expected === actual;
}

function sameKey(expected: DumpedKey, actual: DumpedKey | undefined): boolean {
  if (!actual || actual.type !== expected.type) return false;
  if (expected.type === "hash") {
    const got = actual.value as Record<string, string>;
    const fields = Object.keys(expected.value);
    if (fields.length !== Object.keys(got).length) return false;
    return fields.every((field) => {
      const want = expected.value[field] as string;
      const have = got[field];
      if (have === undefined) return false;
      // tags keep their exact text ("{}" when empty); JSON documents compare parsed.
      return field === "tags" ? want === have : sameText(want, have);
    });
  }
  if (expected.type === "list") {
    const got = actual.value as string[];
    return got.length === expected.value.length && expected.value.every((item, i) => sameText(item, got[i] as string));
  }
  return JSON.stringify(expected.value) === JSON.stringify(actual.value);
}

const ADDRESS = /table: 0x[0-9a-f]+/g;

/** Replays one scenario on an empty database; returns every difference found (empty when equal). */
export async function replayScenario(
  redis: Redis,
  capture: { drain(): Promise<[string, string][]> },
  scenario: GoldenScenario,
): Promise<string[]> {
  const problems: string[] = [];
  await redis.flushdb();
  await capture.drain();
  for (const [index, step] of scenario.steps.entries()) {
    const where = `${scenario.file} step ${index} ${JSON.stringify(step.call)}`;
    let reply: QlessReply = null;
    let error: string | undefined;
    try {
      reply = await callQlessRaw(redis, step.call);
    } catch (caught) {
      error = (caught as Error).message.replace(ADDRESS, "table: <address>");
    }
    if (step.error !== undefined || error !== undefined) {
      if (step.error !== error) problems.push(`${where}: error ${JSON.stringify(error)} != ${JSON.stringify(step.error)}`);
    } else if (!sameReply(step.reply, reply)) {
      problems.push(`${where}: reply ${JSON.stringify(reply)} != ${JSON.stringify(step.reply)}`);
    }
    const published = await capture.drain();
    const messagesMatch =
      published.length === step.published.length &&
      step.published.every(([channel, message], i) => published[i]?.[0] === channel && sameText(message, published[i]?.[1] ?? ""));
    if (!messagesMatch) {
      problems.push(`${where}: published ${JSON.stringify(published)} != ${JSON.stringify(step.published)}`);
    }
    const keys = await dumpKeys(redis);
    const names = new Set([...Object.keys(keys), ...Object.keys(step.keys)]);
    for (const name of [...names].sort()) {
      const want = step.keys[name];
      const have = keys[name];
      if (!want || !sameKey(want, have)) {
        problems.push(`${where}: key ${name} ${JSON.stringify(have)} != ${JSON.stringify(want)}`);
      }
    }
    if (problems.length > 0) break; // later steps only repeat the first difference
  }
  return problems;
}

const FENCE = "switchyard-golden-fence";

/** Collects every ql:* message; drain() waits for a fence message so nothing is in flight. */
export async function captureMessages(subscriber: Redis, publisher: Redis) {
  const seen: [string, string][] = [];
  let fenceSeen: (() => void) | undefined;
  subscriber.on("pmessage", (_pattern: string, channel: string, message: string) => {
    if (channel === FENCE) fenceSeen?.();
    else seen.push([channel, message]);
  });
  await subscriber.psubscribe("ql:*", FENCE);
  return {
    async drain(): Promise<[string, string][]> {
      const fenced = new Promise<void>((resolve) => {
        fenceSeen = resolve;
      });
      await publisher.publish(FENCE, "1");
      await fenced;
      return seen.splice(0, seen.length);
    },
  };
}
