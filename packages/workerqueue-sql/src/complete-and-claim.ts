import type { CompleteOptions } from "@switchyard/core";
import { type ClaimRequest, claimedInOrder, newLock, postgresClaim } from "./claim.js";
import type { JobRow } from "./columns.js";
import type { Store } from "./options.js";
import { completeValues, heldUpdate } from "./transitions.js";

/**
 * PostgreSQL: completes a job and claims the worker's next ones in one statement, so a busy worker
 * pays one round trip per job. The completion is the guarded UPDATE of complete() in a data-modifying
 * CTE; the claim's candidate lists are read only if it changed a row, and never take that row. Null
 * when the completion changed nothing (the caller then completes the slow way, which names the error).
 */
export async function completeAndClaimPostgres(
  store: Store,
  queue: string,
  id: string,
  options: CompleteOptions,
  request: ClaimRequest,
): Promise<{ completed: JobRow; next: JobRow[] } | null> {
  const done = heldUpdate(store, queue, id, options.worker, completeValues(store, options, request.now), request.now).toSQL();
  const claim = postgresClaim(store, request, newLock(), "exists (select 1 from done) and id not in (select id from done)");
  const result = await store.knex.raw(
    `with done as (${done.sql}), ${claim.lists}, claimed as (${claim.update})
     select done.*, -1 as sy_claim_tier from done union all select * from claimed`,
    [...(done.bindings as never[]), ...claim.listBindings, ...claim.updateBindings],
  );
  const rows = (result as { rows: Array<JobRow & { sy_claim_tier: number }> }).rows;
  const completed = rows.find((row) => row.sy_claim_tier === -1);
  if (!completed) return null;
  return { completed, next: claimedInOrder(rows.filter((row) => row.sy_claim_tier !== -1)) };
}
