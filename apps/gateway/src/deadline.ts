import { type Backend, BackendUnavailableError, wrapMethods } from "@switchyard/core";

/** Calls the deadline does not cover: closing waits for what is in flight. */
const UNTIMED = new Set(["close"]);

/**
 * The backend, each call answered within `timeoutMs` or refused with BackendUnavailableError naming
 * the backend (a 503): a store that is frozen or unreachable must not hold requests open. The call
 * itself is not cancelled; the next one tries the store again, so the gateway recovers by itself
 * when the store comes back. Unavailability errors of the adapter get the backend's name too.
 */
export function withDeadline<B extends Backend>(name: string, backend: B, timeoutMs: number): B {
  const unavailable = (detail: string, cause?: unknown) =>
    new BackendUnavailableError(`backend "${name}" (${backend.kind}) ${detail}`, cause === undefined ? undefined : { cause });
  const withName = (error: unknown) =>
    error instanceof BackendUnavailableError && !error.message.startsWith(`backend "${name}"`)
      ? unavailable(`is unavailable: ${error.message}`, error)
      : error;
  return wrapMethods(backend, (operation, method, target) => {
    if (UNTIMED.has(operation)) return method;
    const late = `did not answer ${operation} within ${timeoutMs} ms`;
    // One promise per call, settled by whichever comes first: the answer or the timer.
    return (...args: unknown[]) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(unavailable(late)), timeoutMs);
        const refuse = (error: unknown) => {
          clearTimeout(timer);
          reject(withName(error));
        };
        try {
          Promise.resolve(method.apply(target, args)).then((value) => {
            clearTimeout(timer);
            resolve(value);
          }, refuse);
        } catch (error) {
          refuse(error);
        }
      });
  });
}
