import { useState } from "preact/hooks";
import { api, jobPath } from "../api.js";
import { ConfirmButton } from "../components/Confirm.js";
import { Notice } from "../components/Notice.js";
import { useSession } from "../session.js";
import { type Actions, type Job, atLeast } from "../types.js";

const UNFINISHED = ["waiting", "delayed", "active", "blocked"];

/**
 * The buttons a job's state, the token's access and the store allow: retry, promote and priority
 * need `write`; cancel needs `admin`, as DELETE does. A read-only token sees none.
 */
export function JobActions({ job, actions, onChanged }: { job: Job; actions: Actions | null; onChanged: () => void }) {
  const who = useSession();
  const [message, setMessage] = useState<{ text: string; error?: boolean } | null>(null);
  const [busy, setBusy] = useState(false);
  const [priority, setPriority] = useState(String(job.priority));
  const path = jobPath(job.queue, job.id);

  const act = async (what: string, run: () => Promise<unknown>) => {
    setBusy(true);
    setMessage({ text: `${what}…` });
    try {
      await run();
      setMessage({ text: `${what}: done` });
      onChanged();
    } catch (error) {
      setMessage({ text: `${what} failed: ${(error as Error).message}`, error: true });
    } finally {
      setBusy(false);
    }
  };

  const write = atLeast(who, "write");
  const canRetry = write && actions?.retry && (job.state === "failed" || job.state === "canceled");
  const canPromote = write && actions?.promote && job.state === "delayed";
  const canPrioritize = write && actions?.priority && ["waiting", "delayed", "blocked"].includes(job.state);
  const canCancel = atLeast(who, "admin") && UNFINISHED.includes(job.state);
  if (!write) return null;
  return (
    <>
      <fieldset class="actions">
        <legend class="visually-hidden">Job actions</legend>
        {canRetry && (
          <button
            type="button"
            class="button primary"
            disabled={busy}
            onClick={() => act("Retry", () => api(`${path}/retry`, { method: "POST" }))}
          >
            Retry
          </button>
        )}
        {canPromote && (
          <button
            type="button"
            class="button"
            disabled={busy}
            onClick={() => act("Promote", () => api(`${path}/promote`, { method: "POST" }))}
          >
            Promote
          </button>
        )}
        {canPrioritize && (
          <form
            class="inline-form"
            onSubmit={(event) => {
              event.preventDefault();
              const value = Number(priority);
              if (!Number.isInteger(value)) return setMessage({ text: "Priority must be a whole number", error: true });
              act("Change priority", () => api(`${path}/priority`, { method: "POST", body: { priority: value } }));
            }}
          >
            <label>
              Priority{" "}
              <input
                type="number"
                step="1"
                inputMode="numeric"
                value={priority}
                onInput={(e) => setPriority((e.target as HTMLInputElement).value)}
              />
            </label>
            <button type="submit" class="button" disabled={busy}>
              Set
            </button>
          </form>
        )}
        {canCancel && (
          <ConfirmButton
            label="Cancel job…"
            question="Cancel this job?"
            confirmLabel="Cancel job"
            busy={busy}
            onConfirm={() => act("Cancel", () => api(path, { method: "DELETE" }))}
          />
        )}
      </fieldset>
      <Notice message={message} />
    </>
  );
}
