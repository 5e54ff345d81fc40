import { z } from "zod";

/**
 * Text every store keeps and finds again, for names and ids: a lone UTF-16 surrogate has no UTF-8
 * form (a SQL or Mongo store would write U+FFFD and never find the value again) and NUL ends a
 * C string in several drivers.
 */
export function storableText(what: string) {
  return z
    .string()
    .min(1, `${what} must not be empty`)
    .max(255, `${what} has at most 255 characters`)
    .refine((text) => !/\p{Cs}/u.test(text), `${what} must be valid Unicode text (it holds a lone UTF-16 surrogate)`)
    .refine((text) => !text.includes("\u0000"), `${what} must not contain NUL characters`)
    .meta({ pattern: STORABLE_TEXT_PATTERN });
}

/**
 * The same rule as a JSON Schema pattern, for the API documents generated from these schemas: no NUL,
 * and a surrogate only as half of a pair. It reads UTF-16 code units, so it needs no `u` flag.
 */
export const STORABLE_TEXT_PATTERN = "^(?:[^\\u0000\\uD800-\\uDFFF]|[\\uD800-\\uDBFF][\\uDC00-\\uDFFF])*$";
