import { groupCommit } from "@switchyard/core";
import type { Knex } from "knex";
import { quoted } from "./bulk-insert.js";
import {
  type ClaimItem,
  type ClaimOutcome,
  type Condition,
  INDEX_ORDER,
  ORDER,
  byClaimOrder,
  newLock,
  queueCondition,
  queueSpellings,
  takeGroup,
} from "./claim.js";
import { ACTIVE_STATUSES, DELAYED_LOCKS, type JobRow, MARKER_LOCKS, STATUS, UNLOCKED } from "./columns.js";
import { withRetry, wroteNothing } from "./db-errors.js";
import type { Store } from "./options.js";
import { sqlDate } from "./row.js";
import { rowIdOf } from "./where.js";

type ClaimedRow = JobRow & { sy_claim_k: number; sy_claim_tier: number };

/**
 * PostgreSQL claims as a group commit (core's groupCommit, per queue): the reserves and
 * complete-and-claims of one queue that arrive while the queue's statements are in flight go
 * together in the next one. Under load a claim costs PostgreSQL a statement's fixed part (parse,
 * plan, the scan of expired leases, commit, the change trigger's NOTIFY) once per group instead of
 * once per caller; a lone caller goes at once. Each caller keeps its own lock id, worker, lease and
 * clock, and gets its own rows: the group's candidates are taken in claim order and dealt out in
 * arrival order. Groups of other queues and other processes run beside it: SKIP LOCKED keeps them apart.
 */
export class PostgresClaimGroup {
  private readonly send: (queue: string, item: ClaimItem) => Promise<ClaimOutcome>;

  constructor(store: Store) {
    this.send = groupCommit((queue, items: ClaimItem[]) => withRetry("claim", () => claimGroup(store, queue, items)), {
      take: takeGroup,
      // One statement of a queue at a time: on the measured 2-core machine two in flight made groups
      // half the size and cost PostgreSQL half as much again per job, with no throughput to show for it.
      maxInFlight: 1,
      // One statement writes all or nothing: a refused value (a result PostgreSQL will not store)
      // fails the group, and each caller then goes alone to get its own answer. A lost connection
      // may have committed, so its callers get that error rather than a second claim.
      retryAlone: wroteNothing,
    });
  }

  static fits(store: Store): boolean {
    return store.dialect === "postgres";
  }

  claim(item: ClaimItem): Promise<ClaimOutcome> {
    return this.send(item.request.queue, item);
  }
}

/**
 * The locked reads' conditions hide every value from the planner: the queue and the clock come from
 * the statement's `given` row, the statuses and locks (this package's constants) as `unseen()`
 * sub-selects, all read as the statement runs; none of them tests a column by its statistics'
 * fraction of nulls. The planner then plans for a queue, status and lock of typical size, where the
 * claim index (which matches queue and status, in claim order, and stops at the LIMIT) is the
 * cheapest read by its own estimates, whatever the statistics say. Given the values, it estimated a
 * queue the statistics do not know (a new one, in a table not analyzed since it came) or a status
 * they saw rare (held jobs) at one row, and read it through workq's (status, locked_queue_id) index:
 * every job of that status in every queue, sorted, at every claim (11 ms a claim with 10,000 jobs
 * pending), or the whole table. And with no value to plan by, PostgreSQL keeps one plan for the
 * statement instead of planning every run again (2 to 4 ms a run, more than running it).
 * whereLeaseExpired() and whereDue() (where.ts) are the rules these spell.
 */
function claimIndexLead(spelling: Condition, status: string): string {
  // Legacy rows without a queue: `is null` has no value to hide.
  const queue = spelling.bindings.length === 0 ? spelling.sql : "sy_queue = (select queue from given)";
  return `${queue} and status = ${unseen(status)}`;
}

const EXPIRED_SQL = "sy_lease_until < (select now from given)";

function dueSql(store: Store): string {
  const due = `locked_queue_id in (${[UNLOCKED, ...DELAYED_LOCKS].map(unseen).join(", ")})
      and (sy_run_at is null or sy_run_at <= (select now from given))`;
  if (!store.layout.rjqueueLocked) return due;
  return `${due} and (locked = false or locked is null or locked_queue_id in (${DELAYED_LOCKS.map(literal).join(", ")}))`;
}

/** One of this package's constants as a value the planner does not see. */
const unseen = (value: string) => `(select ${literal(value)}::text)`;

/** One of this package's constants as an SQL string literal (never one with a `?`, which knex would take for a binding). */
function literal(value: string): string {
  if (value.includes("?")) throw new Error(`workerqueue-sql: ${JSON.stringify(value)} cannot be written into a statement's text`);
  return `'${value.replaceAll("'", "''")}'`;
}

/**
 * The group as one statement. The completions are one UPDATE (`done`, completedSet() below) over
 * their jobs, each found as complete()'s guarded UPDATE finds it; the callers whose claim goes
 * ahead (reserves, and completions that changed their row) are `live`, each with its slot in the
 * claimed order (`before`: rows owed to the callers ahead of it). The candidates are the single
 * claim's two locked, skip-locked lists, expired leases then due rows, for the whole group's count
 * and never a row completed here; the n-th candidate in claim order goes to the caller whose slot
 * holds n. The callers' values go as one array per column (unnest() below), and every value as a
 * binding, never in the text (the pg client would rewrite a `?` of a queue or worker name into a
 * parameter); only this package's constants are written in it (literal()).
 */
async function claimGroup(store: Store, queue: string, items: ClaimItem[]): Promise<ClaimOutcome[]> {
  const table = quoted(store, store.table);
  const ctes: string[] = [];
  const bindings: Knex.RawBinding[] = [];
  const completing = items.some((item) => item.complete);
  // What is due or expired is judged at the earliest clock of the group: no caller gets a job early by its own.
  const now = Math.min(...items.map((item) => item.request.now));
  ctes.push("given (queue, now) as (select ?::text, ?::bigint)");
  bindings.push(queue, now);
  if (completing) {
    const done = completedSet(store, queue, items);
    ctes.push(...done.ctes);
    bindings.push(...done.bindings);
  }

  ctes.push(
    `req (k, cnt, worker, lock, lease_until, started, updated) as (${unnest(store, ["int", "int", "text", "text", "bigint", "bigint", "updated"])})`,
  );
  bindings.push(
    ...columnsOf(
      items.map(({ request }, k) => {
        const { count, worker, now, leaseMs } = request;
        return [k, count, worker, newLock(), now + leaseMs, now, sqlDate(store, now)];
      }),
      7,
    ),
  );
  // A completion that changed nothing claims nothing (its caller then completes the ordinary way, which names the error).
  const liveIf = completing ? " where k not in (select k from completion) or k in (select sy_claim_k from done)" : "";
  ctes.push(`live as (select *, sum(cnt) over (order by k) - cnt as before from req${liveIf})`);

  const wanted = "(select coalesce(sum(cnt), 0) from live)";
  const notDone = completing ? " and id not in (select id from done)" : "";
  // Each list is read as locked reads that the claim index answers in its own order, so that no read
  // sorts or filters a whole queue: one per queue spelling (queueSpellings) and, for expired leases,
  // per held status, since given `status in (...)` PostgreSQL may read a queue by another index.
  const spellings = queueSpellings(store, queue);
  const lockedReads = (name: string, lists: Array<[status: string, condition: string]>, limit: string) => {
    const reads = lists.flatMap(([status, condition]) =>
      spellings.map((spelling) => {
        const read = `${name}_${ctes.length}`;
        ctes.push(`${read} as materialized (select id, sy_priority from ${table}
    where ${claimIndexLead(spelling, status)} and ${condition}
      and not exists (select 1 from ${quoted(store, store.pausedTable)} where queue = (select queue from given))${notDone}
    ${INDEX_ORDER} limit ${limit} for update skip locked)`);
        return `select * from ${read}`;
      }),
    );
    ctes.push(`${name} as (${reads.join(" union all ")})`);
  };
  lockedReads(
    "expired",
    ACTIVE_STATUSES.map((status) => [status, EXPIRED_SQL]),
    wanted,
  );
  lockedReads("due", [[STATUS.pending, dueSql(store)]], `greatest(0, ${wanted} - (select count(*) from expired))`);
  ctes.push(`picked as (select id, tier, row_number() over (order by tier, sy_priority desc, id) as n
    from (select id, sy_priority, 0 as tier from expired union all select id, sy_priority, 1 as tier from due) as candidates)`);
  ctes.push(
    "dealt as (select picked.id, picked.tier, live.* from picked join live on picked.n > live.before and picked.n <= live.before + live.cnt)",
  );

  // claimSet() of a single claim (claim.ts), each caller's values from its `dealt` row.
  const rjqueue = store.layout.rjqueueLocked ? ", locked = true" : "";
  ctes.push(`claimed as (update ${table} set status = ${literal(STATUS.processing)}, locked_queue_id = dealt.lock, attempts = coalesce(${table}.attempts, 0) + 1,
      updated_at = dealt.updated, sy_worker = dealt.worker, sy_lease_until = dealt.lease_until, sy_started_ms = dealt.started,
      sy_run_at = null${rjqueue}
    from dealt where ${table}.id = dealt.id and ${table}.id = any(array(select id from picked))
    returning ${table}.*, dealt.k as sy_claim_k, dealt.tier as sy_claim_tier)`);

  const answer = completing ? "select done.*, -1 as sy_claim_tier from done union all select * from claimed" : "select * from claimed";
  const result = await store.knex.raw(`with ${ctes.join(",\n")} ${answer}`, bindings);
  return outcomes(items.length, (result as { rows: ClaimedRow[] }).rows);
}

/**
 * The group's completions as CTEs: `completion` (one row per completing caller: its job's row id,
 * found as heldUpdate() finds it, and what completeValues() writes) and `done`, one UPDATE of
 * their rows answering each with its caller's number. The row is the one a caller-chosen id names,
 * else the one whose row id it spells (each an index lookup: the OR of heldUpdate's WHERE makes
 * PostgreSQL read the whole queue when the table has no statistics yet), in the queue, and it is
 * changed only while active and, when a worker is named, held by it; what it gets is
 * completeValues()'s (test/group-claim.test.ts holds the two to the same row).
 */
function completedSet(store: Store, queue: string, items: ClaimItem[]): { ctes: string[]; bindings: Knex.RawBinding[] } {
  const table = quoted(store, store.table);
  const rows = items.flatMap((item, k) => {
    if (!item.complete) return [];
    const { id, options } = item.complete;
    const now = item.request.now;
    // null: no result given, the row keeps its own (a result of JSON null is the text "null").
    const result = options.result !== undefined ? JSON.stringify(options.result) : null;
    return [[k, id, rowIdOf(id), options.worker ?? null, now, sqlDate(store, now), result]];
  });
  const bindings = columnsOf(rows, 7);
  // Neither lookup may order or filter by sy_queue beyond the index it should use: on a table with
  // no statistics yet, PostgreSQL then picks a (sy_queue, ...) index that reads the whole queue.
  const byJobId = (queueSql: string) => `(select t.id from ${table} t where ${queueSql} and t.sy_job_id = c.job_id limit 1)`;
  const lookups = [byJobId("t.sy_queue = ?")];
  const queueBindings: Knex.RawBinding[] = [queue];
  if (queue === store.defaultQueue) lookups.push(byJobId("t.sy_queue is null"));
  const rowQueue = queueCondition(store, queue);
  lookups.push(
    `(select case when ${rowQueue.sql.replaceAll("sy_queue", "t.sy_queue")} then t.id end from ${table} t where t.id = c.row_id and t.sy_job_id is null)`,
  );
  queueBindings.push(...rowQueue.bindings);
  // The rows are found by primary key (`id = any(...)`), and the status is tested as an expression no
  // index answers: given `status in (...)` PostgreSQL joined the completions to every held job of the
  // table, read through workq's (status, locked_queue_id) index, and with both, to a bitmap of the two.
  const status = `(${table}.status || '')`;
  const active = store.layout.rjqueueLocked
    ? `(${status} in (?, ?) or (${status} = ? and ${table}.locked = true and ${table}.locked_queue_id not in (${MARKER_LOCKS.map(() => "?").join(", ")})))`
    : `${status} in (?, ?)`;
  const activeBindings: Knex.RawBinding[] = store.layout.rjqueueLocked
    ? [...ACTIVE_STATUSES, STATUS.pending, ...MARKER_LOCKS]
    : [...ACTIVE_STATUSES];
  const rjqueue = store.layout.rjqueueLocked ? ", locked = false" : "";
  return {
    ctes: [
      `completion (k, job_id, row_id, worker, now, updated, result) as (${unnest(store, ["int", "text", "int", "text", "bigint", "updated", "text"])})`,
      `target as (select c.*, coalesce(${lookups.join(", ")}) as id from completion c)`,
      `done as (update ${table} set status = ?, locked_queue_id = ?${rjqueue}, sy_worker = null, sy_lease_until = null, sy_run_at = null,
          sy_finished_ms = c.now, sy_unique_slot = null, updated_at = c.updated,
          sy_result = coalesce(c.result, ${table}.sy_result),
          duration = case when ${table}.sy_started_ms is null then null else greatest(0, round((c.now - ${table}.sy_started_ms) / 1000.0)) end
        from target c where ${table}.id = c.id and ${table}.id = any(array(select id from target)) and ${active} and (c.worker is null or ${table}.sy_worker = c.worker)
        returning ${table}.*, c.k as sy_claim_k)`,
    ],
    bindings: [...bindings, ...queueBindings, STATUS.complete, UNLOCKED, ...activeBindings],
  };
}

/**
 * A list of rows as one array per column (`updated`: the type of the table's updated_at): the
 * statement's text and its number of parameters stay the same whatever the group's size, so
 * PostgreSQL parses and plans it in the same time for one caller or a hundred. Each array is read
 * as the statement runs (a sub-select), so the planner counts the same rows for every group: seen,
 * a group of one made each run's own plan cheaper than the one plan for all, and PostgreSQL planned
 * the completions of a lone worker again at every run.
 */
function unnest(store: Store, types: string[]): string {
  const updated = store.layout.columnTypes.get("updated_at") ?? "timestamptz";
  return `select * from unnest(${types.map((type) => `(select ?::${type === "updated" ? updated : type}[])`).join(", ")})`;
}

/** Rows of values as one array per column, for unnest(). */
function columnsOf(rows: unknown[][], width: number): Knex.RawBinding[] {
  return Array.from({ length: width }, (_, column) => rows.map((row) => row[column] ?? null) as Knex.RawBinding);
}

/** Each caller's rows: its completed row (tier -1), then what it claimed, expired leases first, each list in claim order. */
function outcomes(count: number, rows: ClaimedRow[]): ClaimOutcome[] {
  const answers = Array.from({ length: count }, () => ({ completed: null as JobRow | null, next: [] as ClaimedRow[] }));
  for (const row of rows) {
    const answer = answers[Number(row.sy_claim_k)];
    if (!answer) continue;
    if (Number(row.sy_claim_tier) === -1) answer.completed = row;
    else answer.next.push(row);
  }
  for (const answer of answers) byClaimOrder(answer.next).sort((a, b) => Number(a.sy_claim_tier) - Number(b.sy_claim_tier));
  return answers;
}
