import {
  ConflictError,
  InvalidStateError,
  LeaseLostError,
  NotFoundError,
  type SwitchyardError,
  ValidationError,
  toBackendError,
} from "@switchyard/core";
import { QlessScriptError } from "./script.js";

/** qless error texts (see the spec) mapped to the core's typed errors, first match wins. */
const RULES: Array<[RegExp, (message: string) => SwitchyardError]> = [
  [/is taken by a job of another queue/, (m) => new ConflictError(m)],
  [/does not exist|running in another queue/, (m) => new NotFoundError(m)],
  [/another worker/, (m) => new LeaseLostError(m)],
  [/not currently running|not running|not currently cancelable|not in the depends state/, (m) => new InvalidStateError(m)],
  [/is a dependency of/, (m) => new InvalidStateError(m)],
  [/not a number|not JSON|missing|Expected|Odd number|must be/, (m) => new ValidationError(m)],
];

/** Turns a qless script error into a typed error; connection problems become BackendUnavailableError. */
export function translateError(error: unknown): unknown {
  if (error instanceof QlessScriptError) {
    const message = `qless-redis: ${error.message}`;
    for (const [pattern, make] of RULES) if (pattern.test(error.message)) return make(message);
    return error;
  }
  return toBackendError("qless-redis", error);
}
