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

export function encodeData(data: Json, format: DataFormat): string {
  if (format === "json") return JSON.stringify(data);
  // YAML 1.1 is what Ruby's Psych/Syck speak: strings such as "yes" or "on" get quoted so Ruby
  // does not read them as booleans. Object keys become Ruby symbols (`:id`), which rjqueue's job classes read as `@record.data[:id]`.
  const body = YAML.stringify(symbolizeKeys(data), { version: "1.1", lineWidth: 0 });
  return isCollection(data) ? `${RUBY_YAML_HEADER}\n${body}` : `${RUBY_YAML_HEADER}${body}`;
}

/** Which format a stored value is in, so a round trip (export/import) can keep it. */
export function formatOf(text: string | null): DataFormat {
  return text?.startsWith("---") ? "yaml" : "json";
}

export function decodeData(text: string | null): Json {
  if (text === null || text === "") return null;
  if (text.startsWith("---")) return fromRubyYaml(text);
  try {
    return JSON.parse(text) as Json;
  } catch {
    // Neither format: a legacy producer wrote free text; hand it over as it is rather than fail the job.
    return text;
  }
}

function fromRubyYaml(text: string): Json {
  try {
    return stripSymbolColons(YAML.parse(text, { version: "1.1", logLevel: "silent" }) ?? null);
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
