/**
 * PostgreSQL parses and plans every unnamed statement it is sent, and the claim and completion
 * statements (one CTE of a dozen parts, postgres-claim.ts) cost it 2-3 ms of planning each, more than
 * running them: a single worker's reserve + complete took about 6 ms where a round trip takes 0.3.
 * A connection made by knexFromUrl therefore sends a statement text it has run before as a named
 * (prepared) statement, which the server parses once per connection and, where its plan does not
 * depend on the values, plans once: the claim 2.1 -> 0.7 ms, the completion 3.1 -> 0.8, an insert or
 * a heartbeat about half (alternated, each statement alone). Where the values matter PostgreSQL
 * keeps planning each call for its values, and parsing is what is saved; the group claim hides its
 * values from the planner for that reason (postgres-claim.ts).
 *
 * Only texts with bindings are named (one without goes by the simple protocol, which allows several
 * statements in one text), from their second run on (a schema statement runs once), and at most
 * MOST_PREPARED per connection, the least recently used deallocated first: the claim's text grows
 * with the number of queues claimed together.
 *
 * A plan the server keeps for a named statement is made for the table as it was then, and kept until
 * an ANALYZE of the table (autovacuum's, a minute or more into a burst of writes) drops it: a claim
 * planned while the table held 20 rows (reading the whole table was the cheapest way then) still read
 * it whole once a bulk load had made it 200,000 (65 ms a claim). So a name older than PLAN_AGE_MS is
 * deallocated at its next run and the text prepared afresh, planned for the table as it is now.
 */

import { setNewest } from "@switchyard/core";

/** What this module uses of a node-postgres client. */
export interface PgClient {
  query(config: unknown, ...rest: unknown[]): unknown;
  /** node-postgres's record of the names it has prepared on this connection. */
  connection?: { parsedStatements?: Record<string, string> };
}

interface QueryConfig {
  text: string;
  values: unknown[];
  name?: string;
}

/** Named statements kept per connection. */
const MOST_PREPARED = 100;
/** Texts remembered as seen once, waiting for a second run. */
const MOST_SEEN_ONCE = 1_000;
/** Longer texts (a bulk's VALUES list) are never named: they rarely repeat and would sit in memory twice. */
const LONGEST_NAMED_TEXT = 16_384;
/** How long a named statement's plans serve before the text is prepared afresh (see above). */
const PLAN_AGE_MS = 10_000;

/** Whether an error is the server refusing a prepared plan because the table's columns changed under it. */
export function isStalePreparedPlan(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown };
  return e?.code === "0A000" && /cached plan must not change result type/.test(String(e.message));
}

function isNamable(config: unknown): config is QueryConfig {
  const query = config as Partial<QueryConfig> & { submit?: unknown };
  return (
    typeof query === "object" &&
    query !== null &&
    typeof query.text === "string" &&
    query.name === undefined &&
    query.submit === undefined &&
    Array.isArray(query.values) &&
    query.values.length > 0 &&
    query.text.length <= LONGEST_NAMED_TEXT
  );
}

/**
 * Makes `client` name the statement texts it runs more than once. A named statement whose table
 * gained or lost columns since it was prepared (another gateway's ready() added one) fails once with
 * isStalePreparedPlan; its name is dropped then, so the next run of the text prepares it afresh
 * (withRetry in db-errors.ts runs the operation again).
 */
export function prepareRepeatedStatements(
  client: PgClient,
  { planAgeMs = PLAN_AGE_MS, clock = Date.now }: { planAgeMs?: number; clock?: () => number } = {},
): void {
  const query = client.query.bind(client);
  /** Each named text's name and when it was prepared, least recently used first. */
  const names = new Map<string, { name: string; preparedAt: number }>();
  const seenOnce = new Map<string, true>();
  let named = 0;

  const deallocate = (text: string, name: string) => {
    names.delete(text);
    if (client.connection?.parsedStatements) delete client.connection.parsedStatements[name];
    // Queued behind what the connection is running; the name is never used again.
    Promise.resolve(query(`deallocate "${name}"`)).catch(() => undefined);
  };

  const nameFor = (text: string): string | undefined => {
    const now = clock();
    const known = names.get(text);
    if (known !== undefined && now - known.preparedAt < planAgeMs) {
      names.delete(text);
      names.set(text, known);
      return known.name;
    }
    if (known !== undefined) deallocate(text, known.name);
    else if (!seenOnce.delete(text)) {
      setNewest(seenOnce, text, true, MOST_SEEN_ONCE);
      return undefined;
    }
    if (names.size >= MOST_PREPARED) {
      const [oldestText, oldest] = names.entries().next().value as [string, { name: string }];
      deallocate(oldestText, oldest.name);
    }
    const fresh = `sy_${++named}`;
    names.set(text, { name: fresh, preparedAt: now });
    return fresh;
  };

  client.query = (config: unknown, ...rest: unknown[]) => {
    if (!isNamable(config)) return query(config, ...rest);
    const name = nameFor(config.text);
    if (name === undefined) return query(config, ...rest);
    const forgetIfStale = (error: unknown) => {
      if (isStalePreparedPlan(error) && names.get(config.text)?.name === name) deallocate(config.text, name);
    };
    const callback = rest.at(-1);
    if (typeof callback === "function") {
      const args = rest.slice(0, -1);
      return query({ ...config, name }, ...args, (error: unknown, result: unknown) => {
        if (error) forgetIfStale(error);
        callback(error, result);
      });
    }
    const answer = query({ ...config, name }, ...rest);
    if (answer instanceof Promise) answer.catch(forgetIfStale);
    return answer;
  };
}
