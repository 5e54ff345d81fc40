import { useState } from "preact/hooks";
import { api } from "../api.js";
import { count, time } from "../format.js";
import { useRefresh } from "../live.js";
import type { MigrationRun } from "../types.js";

function Progress({ copied, total }: { copied: number; total: number | null }) {
  const text = total === null ? `${count(copied)} copied` : `${count(copied)} of ${count(total)}`;
  return (
    <span class="progress-line">
      {total === null ? <progress aria-label={text} /> : <progress value={copied} max={Math.max(1, total)} aria-label={text} />}
      <span class="num">{text}</span>
    </span>
  );
}

/**
 * The migrations and bridges the gateway runs (GET /v1/migrations). A gateway without that route
 * (404), or a token that may not read it, shows nothing at all.
 */
export function Migrations() {
  const [runs, setRuns] = useState<MigrationRun[] | null>(null);
  const running = runs?.some((run) => run.state === "running") ?? false;
  useRefresh(
    () => {
      api<{ runs: MigrationRun[] }>("/migrations")
        .then((answer) => setRuns(answer.runs))
        .catch(() => setRuns(null));
    },
    [running],
    { everyMs: running ? 2_000 : 30_000 },
  );
  if (!runs || runs.length === 0) return null;
  return (
    <section class="panel" aria-labelledby="migrations-title">
      <h2 id="migrations-title">Migrations and bridges</h2>
      <ul class="runs">
        {runs.map((run) => (
          <li key={run.id} class={`run run-${run.state}`}>
            <div class="run-head">
              <strong>{run.kind === "bridge" ? "Bridge" : "Migration"}</strong> <span>{run.from}</span> → <span>{run.to}</span>{" "}
              <span class={`badge state-${run.state}`}>{run.state}</span> <span class="muted">since {time(run.startedAt)}</span>
            </div>
            <Progress copied={run.copied} total={run.total} />
            {run.error && <pre class="error-text">{run.error}</pre>}
            {run.queues.length > 0 && (
              <ul class="run-queues">
                {run.queues.map((queue) => (
                  <li key={queue.queue}>
                    <span class="run-queue-name">{queue.queue}</span> <span class="muted">{queue.state}</span>
                    <Progress copied={queue.copied} total={queue.total} />
                  </li>
                ))}
              </ul>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
