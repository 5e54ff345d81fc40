import { useState } from "preact/hooks";
import { ApiError, api, jobPath, q } from "../api.js";
import { Notice } from "../components/Notice.js";
import { duration, pretty, relative, time } from "../format.js";
import { useJobEvents, useRefresh } from "../live.js";
import { Link, overviewHref, queueHref } from "../router.js";
import type { Actions, Job as JobData } from "../types.js";
import { JobActions } from "./JobActions.js";
import { historyOf, stackOf } from "./job-history.js";

/** One job: what it carries, what happened to it, and what may be done with it. */
export function Job({ queue, id }: { queue: string; id: string }) {
  const [job, setJob] = useState<JobData | null>(null);
  const [actions, setActions] = useState<Actions | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [missing, setMissing] = useState(false);

  const refresh = useRefresh(
    () =>
      Promise.all([
        api<{ job: JobData }>(jobPath(queue, id))
          .then((answer) => {
            setJob(answer.job);
            setFailure(null);
            setMissing(false);
          })
          .catch((error: Error) => {
            if (error instanceof ApiError && error.status === 404) setMissing(true);
            else setFailure(error.message);
          }),
        api<{ actions: Actions }>(`${q(queue)}/overview`)
          .then((answer) => setActions(answer.actions))
          .catch(() => setActions(null)),
      ]),
    [queue, id],
  );
  useJobEvents((event) => event.queue === queue && event.jobId === id, refresh);

  return (
    <>
      <nav class="crumbs" aria-label="Breadcrumb">
        <Link href={overviewHref()}>Queues</Link> <span aria-hidden="true">/</span> <Link href={queueHref(queue)}>{queue}</Link>{" "}
        <span aria-hidden="true">/</span>
      </nav>
      <div class="page-head">
        <h1 tabIndex={-1} class="job-title">
          {id}
        </h1>
        {job && (
          <span class={`badge state-${job.state}`} data-testid="job-state">
            {job.state}
          </span>
        )}
      </div>
      <Notice message={failure ? { text: failure, error: true } : null} />
      {missing && (
        <p class="empty">
          No job "{id}" in queue {queue}: it was never there, or its store does not keep it any more.
        </p>
      )}
      {job && <JobActions job={job} actions={actions} onChanged={refresh} />}
      {job && <JobDetails job={job} />}
    </>
  );
}

function JobDetails({ job }: { job: JobData }) {
  const stack = stackOf(job);
  const waited = job.startedAt !== null ? job.startedAt - (job.runAt ?? job.createdAt) : null;
  const ran = job.startedAt !== null && job.finishedAt !== null ? job.finishedAt - job.startedAt : null;
  return (
    <div class="job-grid">
      <section class="panel" aria-labelledby="summary-title">
        <h2 id="summary-title">Summary</h2>
        <dl class="facts">
          <dt>Name</dt>
          <dd>{job.name}</dd>
          <dt>Priority</dt>
          <dd class="num">{job.priority}</dd>
          <dt>Attempts</dt>
          <dd class="num">
            {job.attempts} of {job.maxAttempts}
          </dd>
          <dt>Backoff</dt>
          <dd>{job.backoff ? `${job.backoff.type}, ${duration(job.backoff.delay)}` : "none"}</dd>
          {job.lease && (
            <>
              <dt>Lease</dt>
              <dd>
                {job.lease.worker}, expires {relative(job.lease.expiresAt)}
              </dd>
            </>
          )}
          {job.progress !== null && (
            <>
              <dt>Progress</dt>
              <dd>
                <code>{pretty(job.progress)}</code>
              </dd>
            </>
          )}
          <dt>Tags</dt>
          <dd>{job.tags.length > 0 ? job.tags.join(", ") : "none"}</dd>
          {job.dependsOn.length > 0 && (
            <>
              <dt>Depends on</dt>
              <dd>{job.dependsOn.join(", ")}</dd>
            </>
          )}
          {job.uniqueKey && (
            <>
              <dt>Unique key</dt>
              <dd>{job.uniqueKey}</dd>
            </>
          )}
        </dl>
      </section>
      <section class="panel" aria-labelledby="timings-title">
        <h2 id="timings-title">Timings</h2>
        <dl class="facts num">
          <dt>Created</dt>
          <dd>{time(job.createdAt)}</dd>
          {job.runAt !== null && (
            <>
              <dt>Due</dt>
              <dd>
                {time(job.runAt)} ({relative(job.runAt)})
              </dd>
            </>
          )}
          <dt>Started</dt>
          <dd>{time(job.startedAt)}</dd>
          <dt>Finished</dt>
          <dd>{time(job.finishedAt)}</dd>
          <dt>Waited</dt>
          <dd>{duration(waited)}</dd>
          <dt>Ran for</dt>
          <dd>{duration(ran)}</dd>
        </dl>
      </section>
      {job.error && (
        <section class="panel wide" aria-labelledby="error-title">
          <h2 id="error-title">Error{job.error.group ? `: ${job.error.group}` : ""}</h2>
          <pre class="error-text" data-testid="job-error">
            {job.error.message}
          </pre>
          {stack && (
            <>
              <h3>Stack</h3>
              <pre class="code">{stack}</pre>
            </>
          )}
        </section>
      )}
      <section class="panel wide" aria-labelledby="data-title">
        <h2 id="data-title">Data</h2>
        <pre class="code" data-testid="job-data">
          {pretty(job.data)}
        </pre>
        {job.result !== null && (
          <>
            <h3>Result</h3>
            <pre class="code">{pretty(job.result)}</pre>
          </>
        )}
      </section>
      <section class="panel wide" aria-labelledby="history-title">
        <h2 id="history-title">History</h2>
        <ol class="history num">
          {historyOf(job).map((entry, i) => (
            <li key={`${entry.at}-${i}`}>
              <time dateTime={new Date(entry.at).toISOString()}>{time(entry.at)}</time> <strong>{entry.what}</strong>
              {entry.detail && <span class="muted"> {entry.detail}</span>}
            </li>
          ))}
        </ol>
      </section>
      {Object.keys(job.native).length > 0 && (
        <section class="panel wide">
          <details>
            <summary>Native fields</summary>
            <pre class="code">{pretty(job.native)}</pre>
          </details>
        </section>
      )}
    </div>
  );
}
