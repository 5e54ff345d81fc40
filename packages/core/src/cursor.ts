import { ValidationError } from "./errors.js";

/** Opaque page cursors: base64url JSON, so adapters can carry any position without leaking it. */
export function encodeCursor(position: unknown): string {
  return Buffer.from(JSON.stringify(position)).toString("base64url");
}

export function decodeCursor<T>(cursor: string | undefined, check: (value: unknown) => value is T): T | undefined {
  if (cursor === undefined || cursor === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new ValidationError(`invalid cursor "${cursor}"`);
  }
  if (!check(value)) throw new ValidationError(`invalid cursor "${cursor}"`);
  return value;
}
