import type { Backend, HeldJob, ImportResult, Page } from "./backend.js";
import {
  ChecksumAccumulator,
  type QueueChecksum,
  type VerificationReport,
  type VerifyOptions,
  compareChecksums,
  contentFingerprint,
  fingerprintDigest,
  jobFingerprint,
  migratedState,
  verifyQueue,
} from "./checksum.js";
import { UnsupportedError } from "./errors.js";
import { type JobRemoval, hasJobRemoval } from "./extensions.js";
import type { Job, JobState } from "./job.js";
import { hasRecurringJobs } from "./recurrence.js";
import { SeenIds } from "./seen-ids.js";

export interface MigrationProgress {
  /** Jobs read from the source so far. */
  read: number;
  imported: number;
  /** Jobs the target already had (a resumed migration). */
  skipped: number;
  /** Jobs read but left behind because their state is not among `states`. */
  excluded: number;
  /** Move mode: jobs deleted from the source once the target held them. */
  removed: number;
  /** Move mode: active jobs left in the source (a worker holds them; they are not copied). */
  leftActive: number;
  /** Jobs read, by state. */
  byState: Partial<Record<JobState, number>>;
  /** The export cursor to resume from, or null once the source is exhausted. */
  cursor: string | null;
  /** Checksums of the jobs sent so far (resumed: those of the earlier runs too); see MigrationChecksums. */
  checksums: MigrationChecksums;
}

/**
 * The verification a migration makes as it goes: per state, the checksum of the jobs it sent, as
 * read from the source (under their target ids), and of the same jobs as the target holds them once
 * imported (ImportResult.held, read back by the store's own call, or the page read back). Equal when
 * every job arrived as read; no second pass over either store is needed to say so.
 */
export interface MigrationChecksums {
  source: QueueChecksum;
  target: QueueChecksum;
  /**
   * False when a resumed run read a source whose export can hand a job out twice (Page.mayRepeat):
   * a job read before the interruption and again after it is then counted twice on both sides, so
   * only a full verification (verifyQueue) gives exact counts.
   */
  exact: boolean;
}

export interface MigrateOptions {
  from: Backend;
  to: Backend;
  queue: string;
  /** The queue name on the target; defaults to `queue`. */
  targetQueue?: string;
  /** Jobs per page; default 500. */
  batchSize?: number;
  /** Resume after an interruption: the cursor last reported through onProgress. */
  cursor?: string;
  /** Resuming: the checksums reported with that cursor, which the run goes on summing. */
  checksums?: MigrationChecksums;
  /** Only jobs in these states are copied; all by default. */
  states?: readonly JobState[];
  /**
   * `copy` (default) leaves the source as it was. `move` deletes each job from the source once the
   * target holds it (the source needs JobRemoval); an active job is left to its worker, not copied.
   */
  mode?: "copy" | "move";
  /**
   * Move mode: once every page is read, wait up to this long (ms) for the jobs that were active to
   * leave the active state, and move them too; the ones still active then stay (leftActive). 0 (default) waits not.
   */
  waitActiveMs?: number;
  /** How often the jobs waited for are read again; default 250 ms. */
  waitActivePollMs?: number;
  onProgress?: (progress: MigrationProgress) => void;
  /** Stops before the next page once aborted; the report's cursor says where to go on. */
  signal?: AbortSignal;
  /**
   * Put before every id (and dependency) in the target, for a target that numbers its own jobs while
   * the migration runs (a live cutover whose producers already write there): ids cannot clash then.
   */
  idPrefix?: string;
}

export interface MigrationReport extends MigrationProgress {
  /** Ids read from the source that the target does not hold afterwards; empty when nothing was lost. */
  missing: string[];
  /**
   * Source ids the target already used for a different job (two systems that both number jobs 1, 2...):
   * those source jobs were not copied. Empty when every skipped id was this same job, copied before.
   */
  clashes: string[];
  /**
   * Move mode: jobs a worker took in the source between the copy and the delete. They stay in the
   * source; their copy was taken back out of the target, unless a target worker had taken it too
   * (then they are listed in `doubled`).
   */
  keptInSource: string[];
  /** Move mode: jobs now active in both stores (see keptInSource); empty in a quiet migration. */
  doubled: string[];
  /**
   * Jobs the target holds, but not as they were read (their digest of id, name, data, state,
   * priority, attempts and due time differs): a store that lost something. Moving, they stay in the source.
   */
  altered: string[];
  /**
   * The queue's recurring jobs' definitions (RecurringJobs) written to the target before its jobs, with
   * their count of instances and next run; moving, deleted from the source once written.
   */
  recurrences: number;
}

/**
 * The same job when name and creation second agree (qless keeps createdAt in whole seconds), so a
 * resumed migration's skipped ids are told apart from another job that happens to hold the id.
 */
function sameJob(source: Job, held: HeldJob): boolean {
  return source.name === held.name && Math.floor(source.createdAt / 1000) === Math.floor(held.createdAt / 1000);
}

/** The jobs of these ids: in one call where the backend has getMany, else all gets at once. */
export function getMany(backend: Backend, queue: string, ids: string[]): Promise<Array<Job | null>> {
  return backend.getMany ? backend.getMany(queue, ids) : Promise.all(ids.map((id) => backend.get(queue, id)));
}

/**
 * Copies (or moves) every job of a queue, in every state, from one backend to another, page by page.
 * Ids, attempts, timestamps and native fields travel with the jobs; ids the target already holds are
 * skipped, so running it again (or from a reported cursor) after an interruption is safe, and a skipped
 * id that belongs to a different job is reported as a clash. Each page is verified against the target
 * (and, moving, deleted from the source) while the target writes the next one, and the report lists
 * anything missing and carries checksums of what was sent and what arrived; the page after is read meanwhile.
 */
export async function migrateQueue(options: MigrateOptions): Promise<MigrationReport> {
  const { from, to, queue } = options;
  const targetQueue = options.targetQueue ?? queue;
  const limit = options.batchSize ?? 500;
  const source = options.mode === "move" ? removable(from) : null;
  const sums: PageSums = {
    source: new ChecksumAccumulator(options.checksums?.source),
    target: new ChecksumAccumulator(options.checksums?.target),
  };
  const progress: MigrationProgress = {
    read: 0,
    imported: 0,
    skipped: 0,
    excluded: 0,
    removed: 0,
    leftActive: 0,
    byState: {},
    cursor: options.cursor ?? null,
    checksums: { source: sums.source.result(), target: sums.target.result(), exact: options.checksums?.exact ?? true },
  };
  /** Ids read so far, kept only for an export that can repeat a job (glide-mq's SCAN), so each is copied and summed once. */
  let seen: SeenIds | null = null;
  /** The progress as it stands, checksums included. */
  const current = (): MigrationProgress => {
    progress.checksums = { ...progress.checksums, source: sums.source.result(), target: sums.target.result() };
    return { ...progress, byState: { ...progress.byState } };
  };
  const wanted = options.states ? new Set(options.states) : null;
  const report: PageReport = { missing: [], clashes: [], keptInSource: [], doubled: [], altered: [] };
  const prefix = options.idPrefix ?? "";
  const recurrences = await carryRecurrences(from, to, queue, targetQueue, prefix, source !== null);
  /** Move mode with waitActiveMs: the active jobs left behind, to wait for at the end. */
  const leftBehind: string[] = [];
  const pagesAtOnce = (to.importsAtOnce ?? 1) > 1;
  const nextPage = readAhead((cursor) => from.export(queue, cursor === null ? { limit } : { limit, cursor }), progress.cursor);
  /** The page the target is writing: checked (and, moving, deleted from the source) once the next one is sent. */
  let writing: PageInFlight | null = null;
  const finishCopy = async (copy: CopyInFlight) => {
    const { held, copiedBefore } = await checkPage(to, targetQueue, copy, progress, report, sums);
    if (source) await deleteMoved(source, queue, to, targetQueue, held, copiedBefore, progress, report, prefix);
  };
  const reportPage = (cursor: string | null) => {
    progress.cursor = cursor;
    options.onProgress?.(current());
  };
  /** Leaves out the states not wanted and (moving) the active jobs, and sends the rest to the target. */
  const sendPage = (page: Page<Job>): PageInFlight => {
    let items = page.items;
    if (page.mayRepeat) {
      // Ids read before an interruption are not known here: a resumed run may count such a job twice.
      if (seen === null && options.cursor !== undefined) progress.checksums.exact = false;
      seen ??= new SeenIds();
      const known = seen;
      items = items.filter((job) => known.add(job.id));
    }
    let jobs = wanted ? items.filter((job) => wanted.has(job.state)) : items;
    const excluded = items.length - jobs.length;
    let active: string[] = [];
    if (source) {
      // A job a worker holds stays with it: copied, it would run twice.
      active = jobs.filter((job) => job.state === "active").map((job) => job.id);
      jobs = jobs.filter((job) => job.state !== "active");
    }
    const before = writing?.copy;
    // Two pages are written at once where the target gains by it, unless their jobs can meet there (standsAlone).
    const alongside = pagesAtOnce && before && standsAlone(jobs) && standsAlone(before.jobs);
    const after = alongside ? undefined : before?.importing;
    const copy = jobs.length > 0 ? startCopy(to, targetQueue, jobs, prefix, after) : null;
    return { items, excluded, active, copy, cursor: page.cursor };
  };
  const settle = async (page: PageInFlight) => {
    progress.read += page.items.length;
    for (const job of page.items) progress.byState[job.state] = (progress.byState[job.state] ?? 0) + 1;
    progress.excluded += page.excluded;
    progress.leftActive += page.active.length;
    if (options.waitActiveMs) leftBehind.push(...page.active);
    if (page.copy) await finishCopy(page.copy);
    if (page.cursor !== null) reportPage(page.cursor);
  };
  for (;;) {
    if (options.signal?.aborted) {
      if (writing) await settle(writing);
      return { ...current(), ...report, recurrences };
    }
    const page = await nextPage();
    const sent = sendPage(page);
    // This page goes to the target before the previous one is checked: the target writes while this
    // process checks (and the source deletes), where one waited for the other. The target writes one
    // page at a time, or two where it gains by it (importsAtOnce), and a page is counted and reported (its cursor) once it and every page before it are checked.
    try {
      if (writing) await settle(writing);
    } catch (error) {
      // A run that fails leaves nothing still writing behind it.
      await sent.copy?.importing.catch(() => undefined);
      throw error;
    }
    writing = sent;
    if (page.cursor !== null) continue;
    // The last page is checked, then, before it is reported, the active jobs left behind are waited
    // for (a run stopped while it waits resumes from the page before).
    await settle(writing);
    if (source && leftBehind.length > 0) {
      const { settled, stillActive } = await waitForActive(source, queue, leftBehind, options);
      if (options.signal?.aborted) return { ...current(), ...report, recurrences };
      progress.leftActive -= leftBehind.length - stillActive;
      const moving = wanted ? settled.filter((job) => wanted.has(job.state)) : settled;
      progress.excluded += settled.length - moving.length;
      if (moving.length > 0) await finishCopy(startCopy(to, targetQueue, moving, prefix));
    }
    reportPage(null);
    return { ...current(), ...report, recurrences };
  }
}

/**
 * The verification a migration of a queue ends with: its own checksums (MigrationChecksums) when they
 * are exact and agree, at no further cost; otherwise both queues read again and compared by verifyQueue,
 * which names the ids that differ (a job changed in either store since also shows there).
 */
export async function verifyMigration(
  from: Backend,
  to: Backend,
  report: Pick<MigrationReport, "checksums">,
  options: VerifyOptions,
): Promise<VerificationReport> {
  const { source, target, exact } = report.checksums;
  const compared = compareChecksums(source, target);
  if (exact && compared.equal) {
    return { queue: options.queue, targetQueue: options.targetQueue ?? options.queue, ...compared, differing: [], readAgain: false };
  }
  return verifyQueue(from, to, options);
}

/** Pages read ahead of the copy: the source works while the target writes and this process checks. */
const PAGES_AHEAD = 3;

/**
 * The source's pages in order, each export sent as soon as the one before it answered, so up to
 * PAGES_AHEAD pages are being read or wait to be copied. Answers a function that takes the next one.
 */
function readAhead(read: (cursor: string | null) => Promise<Page<Job>>, cursor: string | null): () => Promise<Page<Job>> {
  const ahead: Array<Promise<Page<Job>>> = [];
  let last: Promise<Page<Job>> | null = null;
  const fill = () => {
    while (ahead.length < PAGES_AHEAD) {
      const before: Promise<Page<Job>> | null = last;
      last = before ? before.then((page) => (page.cursor === null ? page : read(page.cursor))) : read(cursor);
      // Taken in a later turn, or never when the run stops first: no unhandled rejection meanwhile.
      last.catch(() => undefined);
      ahead.push(last);
    }
  };
  fill();
  return () => {
    const page = ahead.shift() as Promise<Page<Job>>;
    fill();
    return page;
  };
}

/**
 * Reads the jobs left active again and again, until none is active, waitActiveMs has passed or the
 * run is aborted; answers those no longer active (a job gone meanwhile, finished and deleted by its
 * store, is in neither) and how many still are. A job taken again before it is moved stays in the source (deleteMoved).
 */
async function waitForActive(
  source: Backend,
  queue: string,
  ids: string[],
  options: MigrateOptions,
): Promise<{ settled: Job[]; stillActive: number }> {
  const deadline = Date.now() + (options.waitActiveMs ?? 0);
  const pollMs = options.waitActivePollMs ?? 250;
  let pending = ids;
  const settled: Job[] = [];
  for (;;) {
    const jobs = await getMany(source, queue, pending);
    const stillActive: string[] = [];
    jobs.forEach((job, i) => {
      if (job === null) return;
      if (job.state === "active") stillActive.push(pending[i] as string);
      else settled.push(job);
    });
    pending = stillActive;
    const left = deadline - Date.now();
    if (pending.length === 0 || left <= 0 || options.signal?.aborted) return { settled, stillActive: pending.length };
    await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, left)));
  }
}

type PageReport = Pick<MigrationReport, "missing" | "clashes" | "keptInSource" | "doubled" | "altered">;

/**
 * Writes the source queue's recurring jobs' definitions to the target (under the target queue, ids
 * prefixed as the jobs'), and deletes them from the source when moving; a rerun writes the same
 * again. A target that keeps none stops the migration before anything is written, rather than drop them.
 */
async function carryRecurrences(
  from: Backend,
  to: Backend,
  queue: string,
  targetQueue: string,
  prefix: string,
  move: boolean,
): Promise<number> {
  if (!hasRecurringJobs(from)) return 0;
  const recurrences = await from.recurrences(queue);
  if (recurrences.length === 0) return 0;
  if (!hasRecurringJobs(to)) {
    throw new UnsupportedError(
      `queue ${queue} has ${recurrences.length} recurring job(s), which ${to.kind} cannot keep (it has no RecurringJobs); nothing was written`,
    );
  }
  for (const recurrence of recurrences) {
    await to.putRecurrence({ ...recurrence, id: prefix + recurrence.id, queue: targetQueue });
    if (move) await from.removeRecurrence(recurrence.id);
  }
  return recurrences.length;
}

/** The checksums a run sums as the target answers its pages: the jobs as sent, and as held. */
interface PageSums {
  source: ChecksumAccumulator;
  target: ChecksumAccumulator;
}

function removable(backend: Backend): Backend & JobRemoval {
  if (hasJobRemoval(backend)) return backend;
  throw new UnsupportedError(`moving jobs needs a source that can delete them; ${backend.kind} cannot`);
}

/**
 * A job the target holds otherwise than it was read still arrived whole when a worker of the target
 * already took it on (a live cutover): its state moved on, and all it was given is as read.
 */
function arrivedAfterATargetWorker(read: Job, held: HeldJob): boolean {
  return held.state !== migratedState(read) && contentFingerprint(held) === contentFingerprint(read);
}

/** The job as the target gets it: its id and dependencies under the prefix. */
const renamed = (job: Job, prefix: string): Job =>
  prefix === "" ? job : { ...job, id: prefix + job.id, dependsOn: job.dependsOn.map((id) => prefix + id) };

/** A page sent to the target: its jobs (as the source had them, and as the target gets them) and the import. */
interface CopyInFlight {
  sourceJobs: Job[];
  jobs: Job[];
  importing: Promise<ImportResult>;
}

/** A page read from the source, its copy on the way to the target. */
interface PageInFlight {
  items: Job[];
  /** Jobs read in states not wanted. */
  excluded: number;
  /** Moving: ids of the jobs a worker held, left in the source. */
  active: string[];
  copy: CopyInFlight | null;
  /** The export cursor after this page. */
  cursor: string | null;
}

/**
 * Whether a page's jobs can be written beside another page's, each import in a transaction or
 * script of its own: jobs of two pages meet in a target only through a dependency (an import marks
 * a blocked job's parents, and the jobs a blocked job waits for, among what it sees written; two
 * pages written at once would each miss the other's) or a unique key. Ids do not meet: a page never
 * repeats an id of a page before it (SeenIds).
 */
const standsAlone = (jobs: Job[]): boolean => jobs.every((job) => job.state !== "blocked" && job.uniqueKey === null);

/**
 * Sends a page to the target, once the page before (`after`) is written when the two must not be
 * written at once; checkPage waits for the import and checks it. A page written beside one that
 * failed stays written: the run stops at the failed one, and a resumed run finds it copied.
 */
function startCopy(to: Backend, targetQueue: string, sourceJobs: Job[], prefix: string, after?: Promise<unknown>): CopyInFlight {
  const jobs = sourceJobs.map((job) => renamed(job, prefix));
  const importing = after ? after.then(() => to.import(targetQueue, jobs)) : to.import(targetQueue, jobs);
  // Awaited by checkPage after the previous page is checked; a run that fails before then must not leave it unhandled.
  importing.catch(() => undefined);
  return { sourceJobs, jobs, importing };
}

/**
 * Checks an imported page against what the target holds: the import's own answer when the backend
 * gives it (ImportResult.held), else the page read back. Answers the (source) jobs the target now
 * holds as they were read, and the ids of those it held before this page (the import skipped them).
 */
async function checkPage(
  to: Backend,
  targetQueue: string,
  copy: CopyInFlight,
  progress: MigrationProgress,
  report: PageReport,
  sums: PageSums,
): Promise<{ held: Job[]; copiedBefore: Set<string> }> {
  const { jobs } = copy;
  const expected = jobs.map((job) => jobFingerprint(job));
  const result = await copy.importing;
  progress.imported += result.imported;
  progress.skipped += result.skipped.length;
  const skipped = new Set(result.skipped);
  const targets: Array<HeldJob | null> =
    result.held?.length === jobs.length
      ? result.held
      : await getMany(
          to,
          targetQueue,
          jobs.map((job) => job.id),
        );
  const held: Job[] = [];
  jobs.forEach((job, i) => {
    const target = targets[i] ?? null;
    const readPrint = expected[i] as string;
    const readDigest = fingerprintDigest(readPrint);
    sums.source.addDigest(migratedState(job), readDigest);
    const heldPrint = target && jobFingerprint(target);
    if (target) sums.target.addDigest(migratedState(target), heldPrint === readPrint ? readDigest : fingerprintDigest(heldPrint as string));
    if (target === null) report.missing.push(job.id);
    else if (skipped.has(job.id) && !sameJob(job, target)) report.clashes.push(job.id);
    // A job copied before (a resumed run) may have moved on in the target since: only new copies compare.
    else if (!skipped.has(job.id) && heldPrint !== readPrint && !arrivedAfterATargetWorker(job, target)) report.altered.push(job.id);
    else held.push(copy.sourceJobs[i] as Job);
  });
  const copiedBefore = new Set(copy.sourceJobs.filter((_, i) => skipped.has((jobs[i] as Job).id)).map((job) => job.id));
  return { held, copiedBefore };
}

/**
 * Deletes from the source the jobs the target holds. One a worker took meanwhile is not deleted
 * there; its copy is taken back out of the target, so it runs once (unless a target worker already
 * has it too: reported as doubled). A job the target held before this page (`copiedBefore`) that the
 * source no longer has was moved then (a source may return a job on two pages, as SCAN may): its copy stays.
 */
async function deleteMoved(
  source: Backend & JobRemoval,
  queue: string,
  to: Backend,
  targetQueue: string,
  held: Job[],
  copiedBefore: Set<string>,
  progress: MigrationProgress,
  report: PageReport,
  prefix: string,
): Promise<void> {
  const removed = new Set(
    await source.remove(
      queue,
      held.map((job) => job.id),
    ),
  );
  progress.removed += removed.size;
  let kept = held.filter((job) => !removed.has(job.id)).map((job) => job.id);
  // Of the jobs the target held before this page, those gone from the source were moved then.
  const heldBefore = kept.filter((id) => copiedBefore.has(id));
  if (heldBefore.length > 0) {
    const inSource = await getMany(source, queue, heldBefore);
    const gone = new Set(heldBefore.filter((_, i) => inSource[i] === null));
    kept = kept.filter((id) => !gone.has(id));
  }
  if (kept.length === 0) return;
  report.keptInSource.push(...kept);
  const copies = kept.map((id) => prefix + id);
  const undone = new Set(hasJobRemoval(to) ? await to.remove(targetQueue, copies) : []);
  report.doubled.push(...copies.filter((id) => !undone.has(id)));
}
