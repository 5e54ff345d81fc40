import { useRef, useState } from "preact/hooks";
import { api, q } from "../api.js";
import { Migrations } from "../components/Migrations.js";
import { Notice } from "../components/Notice.js";
import { count } from "../format.js";
import { useJobEvents, useRefresh } from "../live.js";
import { Link, queueHref } from "../router.js";
import { type Overview as OverviewData, type QueueSummary, STATES } from "../types.js";
import { useSearchKey } from "./keys.js";

/** Every queue on every backend, its counts by state kept current by the event stream. */
export function Overview() {
  const [data, setData] = useState<OverviewData | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [filter, setFilter] = useState("");
  const search = useRef<HTMLInputElement>(null);
  useSearchKey(search);

  const refreshAll = useRefresh(
    () =>
      api<OverviewData>("/overview")
        .then((answer) => {
          setData(answer);
          setFailure(null);
        })
        .catch((error: Error) => setFailure(error.message)),
    [],
  );

  // Queues an event touched since the last refresh: only they are read again.
  const touched = useRef(new Set<string>());
  const refreshTouched = useRefresh(
    () => {
      const queues = [...touched.current];
      touched.current.clear();
      return Promise.all(
        queues.map((queue) =>
          api<QueueSummary>(`${q(queue)}/overview`)
            .then((summary) =>
              setData(
                (current) =>
                  current && { ...current, queues: current.queues.map((row) => (row.name === queue ? { ...row, ...summary } : row)) },
              ),
            )
            // The next full refresh tells what went wrong; a row keeps its last counts meanwhile.
            .catch(() => undefined),
        ),
      );
    },
    [],
    { settleMs: 300, everyMs: 3_600_000 },
  );
  useJobEvents(
    () => true,
    (event) => {
      if (!data?.queues.some((row) => row.name === event.queue)) return refreshAll();
      touched.current.add(event.queue);
      refreshTouched();
    },
  );

  const shown = (data?.queues ?? []).filter((row) => row.name.toLowerCase().includes(filter.trim().toLowerCase()));
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Queues</h1>
        <label class="search">
          <span class="visually-hidden">Filter queues by name</span>
          <input
            ref={search}
            type="search"
            placeholder="Filter queues  ( / )"
            value={filter}
            onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
            aria-keyshortcuts="/"
          />
        </label>
      </div>
      <Notice message={failure ? { text: failure, error: true } : null} />
      {data?.backends
        .filter((backend) => backend.error)
        .map((backend) => (
          <p key={backend.name} class="notice notice-error" role="alert">
            Backend {backend.name} ({backend.type}): {backend.error}
          </p>
        ))}
      <div class="table-wrap">
        <table class="queues" aria-describedby="queues-caption">
          <caption id="queues-caption" class="visually-hidden">
            Every queue with its backend and its jobs by state
          </caption>
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col">Backend</th>
              {STATES.map((state) => (
                <th key={state} scope="col" class="num-col">
                  {state}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {shown.map((row) => (
              <tr key={`${row.backend}/${row.name}`} data-queue={row.name}>
                <th scope="row" class="queue-name">
                  <Link href={queueHref(row.name)}>{row.name}</Link>
                  {row.paused && <span class="badge paused">paused</span>}
                  {row.error && (
                    <span class="badge state-failed" title={row.error}>
                      unreadable
                    </span>
                  )}
                </th>
                <td data-label="Backend">
                  <span class="backend-name">{row.backend}</span> <span class="badge type">{row.type}</span>
                </td>
                {STATES.map((state) => (
                  <td key={state} data-label={state} class={`num num-col${row.counts[state] === 0 ? " zero" : ""}`} data-state={state}>
                    {count(row.counts[state])}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
        {data && shown.length === 0 && (
          <p class="empty">{data.queues.length === 0 ? "No queues yet: enqueue a job through any door." : "No queue matches."}</p>
        )}
        {!data && !failure && <p class="empty">Loading…</p>}
      </div>
      <Migrations />
      {data && (
        <p class="muted">
          {count(data.queues.length)} queues on {count(data.backends.length)} backends:{" "}
          {data.backends.map((backend) => `${backend.name} (${backend.type})`).join(", ")}
        </p>
      )}
    </>
  );
}
