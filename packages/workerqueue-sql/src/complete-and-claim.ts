import type { CompleteOptions } from "@switchyard/core";
import { type ClaimRequest, claimedInOrder, mysqlClaim, newLock, postgresClaim } from "./claim.js";
import type { JobRow } from "./columns.js";
import { sendScript } from "./mysql-script.js";
import type { Store } from "./options.js";
import { completeValues, heldUpdate, mysqlHeldUpdate } from "./transitions.js";

/**
 * Completes a job and claims the worker's next ones in one round trip: PostgreSQL and MySQL-family
 * servers (see each). Null when the completion changed nothing, or when the store cannot do it in
 * one (SQLite, a MySQL connection without multipleStatements, MySQL): the caller then completes
 * and reserves the ordinary way.
 */
export function completeAndClaim(
  store: Store,
  queue: string,
  id: string,
  options: CompleteOptions,
  request: ClaimRequest,
): Promise<{ completed: JobRow; next: JobRow[] } | null> {
  if (store.dialect === "postgres") return completeAndClaimPostgres(store, queue, id, options, request);
  if (store.dialect === "mysql") return completeAndClaimMysql(store, queue, id, options, request);
  return Promise.resolve(null);
}

/**
 * MariaDB: one script, one READ COMMITTED transaction: complete()'s guarded UPDATE and read-back
 * (mysqlHeldUpdate), then the claim (mysqlClaim), which takes nothing unless the completion changed
 * its row (`@sy_done > 0`). The completed row is no longer a candidate of either list by then. A
 * failure rolls both back, so a retry never meets a completion of its own.
 */
async function completeAndClaimMysql(
  store: Store,
  queue: string,
  id: string,
  options: CompleteOptions,
  request: ClaimRequest,
): Promise<{ completed: JobRow; next: JobRow[] } | null> {
  const done = mysqlHeldUpdate(store, queue, id, options.worker, completeValues(store, options, request.now), request.now);
  const claim = mysqlClaim(store, request, newLock(), "@sy_done > 0");
  const results = await sendScript(store, [...done.statements, ...claim.statements], claim.needs);
  const completed = results && done.row(results);
  if (!results || !completed) return null;
  return { completed, next: claim.rows(results.slice(done.statements.length)) };
}

/**
 * PostgreSQL: completes a job and claims the worker's next ones in one statement, so a busy worker
 * pays one round trip per job. The completion is the guarded UPDATE of complete() in a data-modifying
 * CTE; the claim's candidate lists are read only if it changed a row, and never take that row. Null
 * when the completion changed nothing (the caller then completes the slow way, which names the error).
 */
async function completeAndClaimPostgres(
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
