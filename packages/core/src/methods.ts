/** A method as a proxy hands it out: called with the target as `this`, or with the proxy when passed through. */
export type Method = (...args: unknown[]) => unknown;

/**
 * A proxy of `target` whose methods are `wrap(operation, method, target)`, made once per method and
 * reused while the property holds the same function: a call through the proxy builds no closure of
 * its own, however many layers are stacked (the gateway puts four around every backend call).
 * Properties that are not functions pass through as they are.
 */
export function wrapMethods<T extends object>(target: T, wrap: (operation: string, method: Method, target: T) => Method): T {
  const wrappers = new Map<PropertyKey, { method: Method; wrapper: Method }>();
  return new Proxy(target, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      const cached = wrappers.get(property);
      if (cached?.method === value) return cached.wrapper;
      const wrapper = wrap(String(property), value as Method, target);
      wrappers.set(property, { method: value as Method, wrapper });
      return wrapper;
    },
  });
}
