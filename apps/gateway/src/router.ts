import { type Backend, NotFoundError, ValidationError } from "@switchyard/core";
import type { NamedBackend } from "./backends.js";
import type { Route } from "./config.js";

/** The longest queue name any door accepts; every native layout can hold it. */
export const MAX_QUEUE_NAME = 255;

interface CompiledRoute {
  pattern: string;
  regex: RegExp;
  target: NamedBackend;
}

/** Turns `emails.*` into an anchored regex where only `*` is special. */
export function compilePattern(pattern: string): RegExp {
  const body = pattern
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${body}$`, "s");
}

/** Picks the backend of a queue by the configured patterns; first match wins. */
export class QueueRouter {
  private readonly routes: CompiledRoute[];

  constructor(
    routes: Route[],
    private readonly backends: Map<string, NamedBackend>,
  ) {
    this.routes = routes.map((route) => {
      const target = backends.get(route.backend);
      if (!target) throw new Error(`route ${route.pattern} names unknown backend ${route.backend}`);
      return { pattern: route.pattern, regex: compilePattern(route.pattern), target };
    });
  }

  /** The backend serving `queue`; NotFoundError naming the queue when no pattern matches. */
  resolve(queue: string): NamedBackend {
    if (queue.length === 0 || queue.length > MAX_QUEUE_NAME) {
      throw new ValidationError(`queue name must be 1 to ${MAX_QUEUE_NAME} characters`);
    }
    const route = this.routes.find((candidate) => candidate.regex.test(queue));
    if (!route) throw new NotFoundError(`no route matches queue "${queue}"`, { queue });
    return route.target;
  }

  backendFor(queue: string): Backend {
    return this.resolve(queue).backend;
  }

  /**
   * Every queue any backend knows, kept only where the routes send that name to that backend:
   * a queue left behind in a store the routes no longer point at is not reachable through the doors.
   */
  async queues(): Promise<Array<{ name: string; backend: string }>> {
    const found: Array<{ name: string; backend: string }> = [];
    for (const named of this.backends.values()) {
      for (const name of await named.backend.queues()) {
        const route = this.routes.find((candidate) => candidate.regex.test(name));
        if (route?.target === named) found.push({ name, backend: named.name });
      }
    }
    return found.sort((a, b) => a.name.localeCompare(b.name));
  }
}
