import type { Json } from "@switchyard/core";
import YAML from "yaml";
import type { DataFormat } from "./options.js";

/**
 * The `data` column holds JSON (workq's C++ modules, since 2009) or Ruby YAML with symbol keys
 * (rjqueue's `serialize :data` of an options Hash: `--- \n:id: 5\n:size: 64x32\n`). New rows are
 * written in the configured format; rows of either format are read.
 */

/** Ruby's YAML document header as Syck/Psych of that era wrote it (note the space). */
const RUBY_YAML_HEADER = "--- ";

/**
 * The key under which data that is not an object is stored. workqd's modules build a GObject from
 * `data` and mark the job `error` ("Expecting a JSON object") for anything else, and rjqueue's job
 * classes index it as a Hash (`data[:id]`), so an array from a Cloudq producer, or a string or
 * number from `/v1`, is stored as `{"sy_value": <value>}` and read back as the value itself.
 */
export const WRAPPED_VALUE_KEY = "sy_value";

/** Objects pass as they are, except one whose only key is the wrapper's, which is wrapped too. */
function asObject(data: Json): { [key: string]: Json } {
  const isObject = data !== null && typeof data === "object" && !Array.isArray(data);
  if (isObject && !isWrapped(data)) return data;
  return { [WRAPPED_VALUE_KEY]: data };
}

function isWrapped(value: unknown): value is { [WRAPPED_VALUE_KEY]: Json } {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === WRAPPED_VALUE_KEY;
}

function unwrap(value: Json): Json {
  return isWrapped(value) ? value[WRAPPED_VALUE_KEY] : value;
}

export function encodeData(data: Json, format: DataFormat): string {
  const stored = asObject(data);
  if (format === "json") return JSON.stringify(stored);
  // YAML 1.1 is what Ruby's Psych/Syck speak: strings such as "yes" or "on" get quoted so Ruby
  // does not read them as booleans. Object keys become Ruby symbols (`:id`), which rjqueue's job classes read as `@record.data[:id]`.
  const body = YAML.stringify(symbolizeKeys(stored), { version: "1.1", lineWidth: 0 });
  return isCollection(stored) ? `${RUBY_YAML_HEADER}\n${body}` : `${RUBY_YAML_HEADER}${body}`;
}

/** Which format a stored value is in, so a round trip (export/import) can keep it. */
export function formatOf(text: string | null): DataFormat {
  return text?.startsWith("---") ? "yaml" : "json";
}

export function decodeData(text: string | null): Json {
  if (text === null || text === "") return null;
  if (text.startsWith("---")) return fromRubyYaml(text);
  try {
    return unwrap(JSON.parse(text) as Json);
  } catch {
    // Neither format: a legacy producer wrote free text; hand it over as it is rather than fail the job.
    return text;
  }
}

function fromRubyYaml(text: string): Json {
  try {
    return unwrap(stripSymbolColons(YAML.parse(text, { version: "1.1", logLevel: "silent" }) ?? null));
  } catch {
    return text;
  }
}

function isCollection(value: Json): boolean {
  return Array.isArray(value) ? value.length > 0 : value !== null && typeof value === "object" && Object.keys(value).length > 0;
}

function symbolizeKeys(value: Json): unknown {
  if (Array.isArray(value)) return value.map(symbolizeKeys);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [`:${key}`, symbolizeKeys(inner)]));
  }
  return value;
}

function stripSymbolColons(value: unknown): Json {
  if (Array.isArray(value)) return value.map(stripSymbolColons);
  if (value instanceof Date) return value.toISOString();
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>).map(([key, inner]) => [
        key.startsWith(":") ? key.slice(1) : key,
        stripSymbolColons(inner),
      ]),
    );
  }
  if (typeof value === "bigint") return Number(value);
  if (value === undefined) return null;
  return value as Json;
}
