import { type Backend, JOB_STATES, type Job, isSwitchyardError, wrapMethods } from "@switchyard/core";
import type { MiddlewareHandler } from "hono";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { NamedBackend } from "./backends.js";
import type { GatewayEnv } from "./errors.js";
import type { MigrationRun, QueueProgress } from "./migrate/runs.js";
import { COST_SHARE, LARGE_QUEUE_JOBS, type QueueCounts } from "./queue-counts.js";
import { doorOf } from "./request-log.js";

/** How long the per-queue job counts of one scrape are reused: a scraper never loads the stores. */
const COUNTS_TTL_MS = 5_000;

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface RequestLabels {
  timed: Record<"door" | "method" | "route", string>;
  counted(status: number): Record<"door" | "method" | "route" | "status", string>;
}

/**
 * The gateway's Prometheus metrics, served at /metrics: requests by door, route and status with
 * their latency; jobs enqueued, completed, failed and retried by backend and queue; every backend
 * call's latency and errors; and the jobs in each state of every queue, counted when scraped.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #requests = new Counter({
    name: "switchyard_http_requests_total",
    help: "HTTP requests answered, by door, method, route and status.",
    labelNames: ["door", "method", "route", "status"] as const,
    registers: [this.registry],
  });
  readonly #requestSeconds = new Histogram({
    name: "switchyard_http_request_duration_seconds",
    help: "Time to answer an HTTP request, by door, method and route.",
    labelNames: ["door", "method", "route"] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly #jobs = new Counter({
    name: "switchyard_jobs_total",
    help: "Jobs enqueued (new ones only), completed, failed for good and retried, by backend and queue.",
    labelNames: ["backend", "queue", "event"] as const,
    registers: [this.registry],
  });
  readonly #backendSeconds = new Histogram({
    name: "switchyard_backend_call_duration_seconds",
    help: "Time a backend call took, by backend and operation.",
    labelNames: ["backend", "operation"] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly #backendErrors = new Counter({
    name: "switchyard_backend_errors_total",
    help: "Backend calls that failed, by backend, operation and error code.",
    labelNames: ["backend", "operation", "code"] as const,
    registers: [this.registry],
  });
  readonly #labelsByRoute = new Map<string, RequestLabels>();
  #counted: { at: number; rows: Array<{ backend: string; queue: string; state: string; count: number }> } | undefined;

  constructor(
    backends: () => Iterable<NamedBackend>,
    runs: () => MigrationRun[],
    private readonly queueCounts: QueueCounts,
  ) {
    collectDefaultMetrics({ register: this.registry, prefix: "switchyard_" });
    const metrics = this;
    new Gauge({
      name: "switchyard_queue_jobs",
      help: `Jobs in each state of every queue, counted on scrape (reused for ${COUNTS_TTL_MS / 1000} s; a queue of ${LARGE_QUEUE_JOBS} jobs or more until its count is older than ${COST_SHARE} times what it took).`,
      labelNames: ["backend", "queue", "state"] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const row of await metrics.#countRows(backends))
          this.set({ backend: row.backend, queue: row.queue, state: row.state }, row.count);
      },
    });
    // The migrations and bridges this gateway runs (POST /v1/migrations), one series per queue.
    const runLabels = ["run", "kind", "from", "to", "queue"] as const;
    const perQueue = (gauge: Gauge<(typeof runLabels)[number]>, value: (progress: QueueProgress) => number | null) => {
      gauge.reset();
      for (const run of runs())
        for (const progress of run.queues) {
          const n = value(progress);
          if (n !== null) gauge.set({ run: run.id, kind: run.kind, from: run.from, to: run.to, queue: progress.queue }, n);
        }
    };
    new Gauge({
      name: "switchyard_migration_jobs_copied",
      help: "Jobs a migration copied (or a bridge moved) so far, by run and queue.",
      labelNames: runLabels,
      registers: [this.registry],
      collect() {
        perQueue(this, (progress) => progress.copied);
      },
    });
    new Gauge({
      name: "switchyard_migration_jobs_total",
      help: "Jobs the source held when a migration started the queue (bridges have no total).",
      labelNames: runLabels,
      registers: [this.registry],
      collect() {
        perQueue(this, (progress) => progress.total);
      },
    });
    new Gauge({
      name: "switchyard_migration_running",
      help: "1 while a migration or bridge runs, 0 once it finished, failed or was stopped.",
      labelNames: ["run", "kind", "from", "to"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const run of runs()) this.set({ run: run.id, kind: run.kind, from: run.from, to: run.to }, run.state === "running" ? 1 : 0);
      },
    });
  }

  async #countRows(backends: () => Iterable<NamedBackend>) {
    if (this.#counted && Date.now() - this.#counted.at < COUNTS_TTL_MS) return this.#counted.rows;
    const rows = [];
    for (const named of backends()) {
      // A store that is down leaves its queues out of this scrape; its errors are counted below.
      const queues = await named.backend.queues().catch(() => [] as string[]);
      for (const queue of queues) {
        const counts = await this.queueCounts.read(named, queue).catch(() => undefined);
        if (counts) for (const state of JOB_STATES) rows.push({ backend: named.name, queue, state, count: counts[state] });
      }
    }
    this.#counted = { at: Date.now(), rows };
    return rows;
  }

  /** Counts and times every request; the route is the pattern (`/v1/queues/:queue/jobs`), never the path. */
  middleware(): MiddlewareHandler<GatewayEnv> {
    return async (c, next) => {
      const started = performance.now();
      await next();
      const labels = this.#requestLabels(doorOf(c.req.path), c.req.method, c.req.routePath);
      this.#requestSeconds.observe(labels.timed, (performance.now() - started) / 1000);
      this.#requests.inc(labels.counted(c.res.status));
    };
  }

  /**
   * The label sets of a door, method and route, made once and reused by every request that has them
   * (prom-client keeps them as given). Routes are the registered patterns, so there are few of them.
   */
  #requestLabels(door: string, method: string, route: string): RequestLabels {
    const key = `${door} ${method} ${route}`;
    let labels = this.#labelsByRoute.get(key);
    if (!labels) {
      const timed = { door, method, route };
      const byStatus = new Map<number, Record<"door" | "method" | "route" | "status", string>>();
      labels = {
        timed,
        counted: (status) => {
          let counted = byStatus.get(status);
          if (!counted) {
            counted = { ...timed, status: String(status) };
            byStatus.set(status, counted);
          }
          return counted;
        },
      };
      this.#labelsByRoute.set(key, labels);
    }
    return labels;
  }

  /** The backend, its calls timed and its job transitions counted. */
  instrument<B extends Backend>(name: string, backend: B): B {
    return wrapMethods(backend, (operation, method, target) => {
      const labels = { backend: name, operation };
      return async (...args: unknown[]) => {
        const started = performance.now();
        try {
          const result = await method.apply(target, args);
          this.#countJobs(name, operation, args[0], result);
          return result;
        } catch (error) {
          this.#backendErrors.inc({ backend: name, operation, code: isSwitchyardError(error) ? error.code : "INTERNAL" });
          throw error;
        } finally {
          this.#backendSeconds.observe(labels, (performance.now() - started) / 1000);
        }
      };
    });
  }

  #countJobs(backend: string, operation: string, queue: unknown, result: unknown): void {
    if (typeof queue !== "string") return;
    const count = (event: string, n = 1) => n > 0 && this.#jobs.inc({ backend, queue, event }, n);
    if (operation === "enqueue") count("enqueued", (result as { created: boolean }).created ? 1 : 0);
    if (operation === "enqueueBulk") count("enqueued", (result as Array<{ created: boolean }>).filter((r) => r.created).length);
    if (operation === "complete" || operation === "completeAndReserve") count("completed");
    if (operation === "fail") count((result as Job).state === "failed" ? "failed" : "retried");
  }
}
