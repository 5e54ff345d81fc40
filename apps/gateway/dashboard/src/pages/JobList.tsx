import { useEffect, useState } from "preact/hooks";
import { api, q } from "../api.js";
import { duration, relative, time } from "../format.js";
import { Link, jobHref, queueHref } from "../router.js";
import type { Job, JobState } from "../types.js";

export const PAGE_SIZE = 25;

/** What the last column says about a job, by the state listed. */
const DETAIL: Record<JobState, { title: string; of: (job: Job) => string }> = {
  waiting: { title: "Waiting for", of: (job) => duration(Date.now() - job.createdAt) },
  delayed: { title: "Due", of: (job) => relative(job.runAt) },
  active: { title: "Worker", of: (job) => (job.lease ? `${job.lease.worker}, lease ${relative(job.lease.expiresAt)}` : "—") },
  completed: { title: "Ran for", of: (job) => (job.startedAt && job.finishedAt ? duration(job.finishedAt - job.startedAt) : "—") },
  failed: { title: "Error", of: (job) => job.error?.message.split("\n")[0] ?? "—" },
  canceled: { title: "Canceled", of: (job) => time(job.finishedAt) },
  blocked: { title: "Waiting on", of: (job) => job.dependsOn.join(", ") || "—" },
};

/** One page of a queue's jobs in one state; `version` changing reads it again. */
export function JobList({
  queue,
  state,
  cursor,
  version,
}: { queue: string; state: JobState; cursor: string | undefined; version: number }) {
  const [page, setPage] = useState<{ jobs: Job[]; cursor: string | null; key: string } | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const key = `${queue}|${state}|${cursor ?? ""}`;
  // biome-ignore lint/correctness/useExhaustiveDependencies: `key` stands for queue, state and cursor; `version` asks for a fresh read.
  useEffect(() => {
    const abort = new AbortController();
    const params = new URLSearchParams({ state, limit: String(PAGE_SIZE) });
    if (cursor) params.set("cursor", cursor);
    api<{ jobs: Job[]; cursor: string | null }>(`${q(queue)}/jobs?${params}`, { signal: abort.signal })
      .then((answer) => {
        setPage({ ...answer, key });
        setFailure(null);
      })
      .catch((error: Error) => {
        if (!abort.signal.aborted) setFailure(error.message);
      });
    return () => abort.abort();
  }, [key, version]);

  const detail = DETAIL[state];
  // The previous rows stay until the next page is there, so the table does not collapse in between.
  const jobs = page?.jobs ?? [];
  return (
    <div class="table-wrap" aria-busy={page?.key !== key}>
      {failure && (
        <p class="notice notice-error" role="alert">
          {failure}
        </p>
      )}
      <table class="jobs">
        <thead>
          <tr>
            <th scope="col">Id</th>
            <th scope="col">Name</th>
            <th scope="col" class="num-col">
              Priority
            </th>
            <th scope="col" class="num-col">
              Attempts
            </th>
            <th scope="col">Created</th>
            <th scope="col">{detail.title}</th>
          </tr>
        </thead>
        <tbody>
          {jobs.map((job) => (
            <tr key={job.id} data-job={job.id}>
              <th scope="row" class="job-id">
                <Link href={jobHref(queue, job.id)}>{job.id}</Link>
              </th>
              <td data-label="Name">{job.name}</td>
              <td data-label="Priority" class="num num-col">
                {job.priority}
              </td>
              <td data-label="Attempts" class="num num-col">
                {job.attempts}/{job.maxAttempts}
              </td>
              <td data-label="Created" class="num">
                {time(job.createdAt)}
              </td>
              <td data-label={detail.title} class="detail">
                {detail.of(job)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {page && jobs.length === 0 && (
        <p class="empty">
          No {state} jobs{cursor ? " on this page" : ""}.
        </p>
      )}
      <nav class="pager" aria-label="Pages">
        {cursor ? <Link href={queueHref(queue, { state })}>« First page</Link> : <span />}
        {page?.cursor ? <Link href={queueHref(queue, { state, cursor: page.cursor })}>Next page »</Link> : <span />}
      </nav>
    </div>
  );
}
