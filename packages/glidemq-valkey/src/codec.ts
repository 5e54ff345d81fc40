import { gunzipSync, gzipSync } from "node:zlib";
import { ValidationError } from "@switchyard/core";

/** glide-mq refuses job data larger than 1 MiB (serialized, before compression). */
export const MAX_JOB_DATA_SIZE = 1_048_576;
const GZIP_PREFIX = "gz:";

/** JSON text of the data, `gz:` + base64(gzip) when compression is on; refuses more than 1 MiB. */
export function encodeData(data: unknown, compression?: "gzip"): string {
  const json = JSON.stringify(data === undefined ? null : data);
  if (json.length > MAX_JOB_DATA_SIZE / 4) {
    const bytes = Buffer.byteLength(json, "utf8");
    if (bytes > MAX_JOB_DATA_SIZE) {
      throw new ValidationError(`glidemq-valkey: job data is ${bytes} bytes, more than glide-mq's limit of ${MAX_JOB_DATA_SIZE}`);
    }
  }
  return compression === "gzip" ? GZIP_PREFIX + gzipSync(Buffer.from(json, "utf8")).toString("base64") : json;
}

/** Reads `data` whether a producer compressed it or not. */
export function decodeText(stored: string): string {
  if (!stored.startsWith(GZIP_PREFIX)) return stored;
  return gunzipSync(Buffer.from(stored.slice(GZIP_PREFIX.length), "base64"), { maxOutputLength: MAX_JOB_DATA_SIZE }).toString("utf8");
}

/** A stored JSON value; text that is not JSON (a foreign serializer) comes back as the string. */
export function parseStored(stored: string | undefined): unknown {
  if (stored === undefined) return null;
  const text = decodeText(stored);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** HGETALL's flat reply from Lua as a record. */
export function flatToRecord(flat: unknown): Record<string, string> {
  const record: Record<string, string> = {};
  if (!Array.isArray(flat)) return record;
  for (let i = 0; i + 1 < flat.length; i += 2) record[String(flat[i])] = String(flat[i + 1]);
  return record;
}
