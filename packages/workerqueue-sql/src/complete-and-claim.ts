import type { CompleteOptions } from "@switchyard/core";
import { type ClaimRequest, mysqlClaim, newLock } from "./claim.js";
import type { JobRow } from "./columns.js";
import { sendScript } from "./mysql-script.js";
import type { Store } from "./options.js";
import { completeValues, mysqlHeldUpdate } from "./transitions.js";

/**
 * Completes a job and claims the worker's next ones in one round trip on MySQL-family servers
 * (PostgreSQL does it in a group claim, postgres-claim.ts). Null when the completion changed
 * nothing, or when the store cannot do it in one (SQLite, a MySQL connection without
 * multipleStatements, MySQL): the caller then completes and reserves the ordinary way.
 */
export function completeAndClaim(
  store: Store,
  queue: string,
  id: string,
  options: CompleteOptions,
  request: ClaimRequest,
): Promise<{ completed: JobRow; next: JobRow[] } | null> {
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
