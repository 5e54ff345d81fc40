import type { z } from "zod";
import { ValidationError } from "./errors.js";

/** Parses with zod and turns its issues into one readable ValidationError. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const details = parsed.error.issues.map((issue) => {
    const path = issue.path.length > 0 ? issue.path.join(".") : what;
    return `${path}: ${issue.message}`;
  });
  throw new ValidationError(`invalid ${what}: ${details.join("; ")}`, { issues: parsed.error.issues });
}
