import { type Backend, BackendUnavailableError } from "@switchyard/core";

/** Calls the deadline does not cover: closing waits for what is in flight. */
const UNTIMED = new Set<string | symbol>(["close"]);

/**
 * The backend, each call answered within `timeoutMs` or refused with BackendUnavailableError naming
 * the backend (a 503): a store that is frozen or unreachable must not hold requests open. The call
 * itself is not cancelled; the next one tries the store again, so the gateway recovers by itself
 * when the store comes back. Unavailability errors of the adapter get the backend's name too.
 */
export function withDeadline<B extends Backend>(name: string, backend: B, timeoutMs: number): B {
  const unavailable = (detail: string, cause?: unknown) =>
    new BackendUnavailableError(`backend "${name}" (${backend.kind}) ${detail}`, cause === undefined ? undefined : { cause });
  return new Proxy(backend, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || UNTIMED.has(property)) return value;
      return async (...args: unknown[]) => {
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(unavailable(`did not answer ${String(property)} within ${timeoutMs} ms`)), timeoutMs);
        });
        try {
          return await Promise.race([value.apply(target, args), deadline]);
        } catch (error) {
          if (error instanceof BackendUnavailableError && !error.message.startsWith(`backend "${name}"`)) {
            throw unavailable(`is unavailable: ${error.message}`, error);
          }
          throw error;
        } finally {
          clearTimeout(timer);
        }
      };
    },
  });
}
