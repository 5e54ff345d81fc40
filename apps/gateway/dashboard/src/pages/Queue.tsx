import { useRef, useState } from "preact/hooks";
import { ApiError, api, jobPath, q } from "../api.js";
import { ConfirmButton } from "../components/Confirm.js";
import { CountTiles } from "../components/Counts.js";
import { Notice } from "../components/Notice.js";
import { ThroughputChart } from "../components/ThroughputChart.js";
import { count } from "../format.js";
import { useJobEvents, useRefresh } from "../live.js";
import { Link, jobHref, navigate, overviewHref } from "../router.js";
import { useSession } from "../session.js";
import { type Actions, type Job, type JobState, type Minute, type QueueSummary, STATES, atLeast } from "../types.js";
import { JobList } from "./JobList.js";
import { useSearchKey } from "./keys.js";

type QueueInfo = QueueSummary & { actions: Actions };

/** One queue: counts, throughput, its jobs by state a page at a time, and the queue's own actions. */
export function Queue({ queue, query }: { queue: string; query: URLSearchParams }) {
  const who = useSession();
  const given = query.get("state") as JobState | null;
  const state: JobState = given && (STATES as readonly string[]).includes(given) ? given : "waiting";
  const cursor = query.get("cursor") ?? undefined;
  const [info, setInfo] = useState<QueueInfo | null>(null);
  const [minutes, setMinutes] = useState<Minute[] | null>(null);
  const [message, setMessage] = useState<{ text: string; error?: boolean } | null>(null);
  const [busy, setBusy] = useState(false);
  const [listVersion, setListVersion] = useState(0);

  const refreshInfo = useRefresh(
    () =>
      api<QueueInfo>(`${q(queue)}/overview`)
        .then(setInfo)
        .catch((error: Error) => setMessage({ text: error.message, error: true })),
    [queue],
  );
  const refreshChart = useRefresh(
    () =>
      api<{ minutes: Minute[] }>(`${q(queue)}/throughput`)
        .then((answer) => setMinutes(answer.minutes))
        .catch(() => setMinutes(null)),
    [queue],
    { settleMs: 2_000, everyMs: 30_000 },
  );
  // The list follows events only on its first page: a later page would shift under the reader.
  const refreshList = useRefresh(() => setListVersion((v) => v + 1), [queue], { settleMs: 1_000, everyMs: 3_600_000 });
  useJobEvents(
    (event) => event.queue === queue,
    (event) => {
      refreshInfo();
      if (event.type === "completed" || event.type === "failed") refreshChart();
      if (!cursor) refreshList();
    },
  );

  const act = async (what: string, path: string, done: (answer: unknown) => string) => {
    setBusy(true);
    setMessage({ text: `${what}…` });
    try {
      setMessage({ text: done(await api(path, { method: "POST" })) });
      refreshInfo();
      setListVersion((v) => v + 1);
    } catch (error) {
      setMessage({ text: `${what} failed: ${(error as Error).message}`, error: true });
    } finally {
      setBusy(false);
    }
  };

  const admin = atLeast(who, "admin");
  return (
    <>
      <nav class="crumbs" aria-label="Breadcrumb">
        <Link href={overviewHref()}>Queues</Link> <span aria-hidden="true">/</span>
      </nav>
      <div class="page-head">
        <h1 tabIndex={-1} class="queue-title">
          {queue}
        </h1>
        <span class="badge type">{info ? `${info.backend} · ${info.type}` : "…"}</span>
        <span class={`badge ${info?.paused ? "paused" : "running"}`} data-testid="queue-state">
          {info?.paused === null ? "no pause" : info?.paused ? "paused" : "running"}
        </span>
        <JobSearch queue={queue} />
      </div>
      {admin && info && (
        <fieldset class="actions">
          <legend class="visually-hidden">Queue actions</legend>
          {info.paused !== null &&
            (info.paused ? (
              <button
                type="button"
                class="button"
                disabled={busy}
                onClick={() => act("Resume", `${q(queue)}/resume`, () => "Queue resumed")}
              >
                Resume queue
              </button>
            ) : (
              <button type="button" class="button" disabled={busy} onClick={() => act("Pause", `${q(queue)}/pause`, () => "Queue paused")}>
                Pause queue
              </button>
            ))}
          <ConfirmButton
            label="Drain…"
            question={`Withdraw the ${count(info.counts.waiting)} waiting jobs?`}
            confirmLabel="Drain"
            busy={busy}
            onConfirm={() =>
              act("Drain", `${q(queue)}/drain`, (answer) => `${count((answer as { drained: number }).drained)} jobs withdrawn`)
            }
          />
        </fieldset>
      )}
      <Notice message={message} />
      <CountTiles counts={info?.counts ?? null} queue={queue} current={state} />
      <section class="panel" aria-labelledby="throughput-title">
        <h2 id="throughput-title">Throughput</h2>
        <ThroughputChart minutes={minutes} />
      </section>
      <section class="panel" aria-labelledby="jobs-title">
        <h2 id="jobs-title">
          <span class="cap">{state}</span> jobs
        </h2>
        <JobList queue={queue} state={state} cursor={cursor} version={listVersion} />
      </section>
    </>
  );
}

/** Finds a job of this queue by id and opens its page. */
function JobSearch({ queue }: { queue: string }) {
  const input = useRef<HTMLInputElement>(null);
  const [status, setStatus] = useState("");
  useSearchKey(input);
  const onSubmit = async (event: Event) => {
    event.preventDefault();
    const id = input.current?.value.trim() ?? "";
    if (!id) return;
    setStatus("Looking…");
    try {
      await api<{ job: Job }>(jobPath(queue, id));
      setStatus("");
      navigate(jobHref(queue, id));
    } catch (error) {
      setStatus(error instanceof ApiError && error.status === 404 ? `No job "${id}" in ${queue}` : (error as Error).message);
    }
  };
  return (
    <form class="search" onSubmit={onSubmit}>
      <label>
        <span class="visually-hidden">Find a job by id</span>
        <input ref={input} type="search" name="id" placeholder="Job id  ( / )" aria-keyshortcuts="/" autocomplete="off" />
      </label>
      <button type="submit" class="button">
        Find
      </button>
      <output class="search-status">{status}</output>
    </form>
  );
}
