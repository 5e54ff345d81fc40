import {
  BackendUnavailableError,
  ConflictError,
  DEFAULT_MAX_ATTEMPTS,
  type EnqueueResult,
  type Job,
  type NormalizedEnqueueInput,
  ValidationError,
  isSwitchyardError,
  runAtOf,
} from "@switchyard/core";
import { BSON, ObjectId } from "mongodb";
import { UNFINISHED, releaseIfReady, unfinishedParents } from "./dependencies.js";
import {
  type CloudqDocument,
  type DocumentId,
  NATIVE,
  type SwitchyardFields,
  argsOf,
  compact,
  documentToJob,
  placeNative,
  priorityFields,
} from "./document.js";
import { asObjectId, idSlot, isDuplicateKey, uniqueSlot } from "./ids.js";
import { findDocument } from "./reads.js";
import type { Store } from "./store.js";

/** What a document is built from: a new job's input, or an imported Job. */
export interface DocumentSource {
  name: string;
  data: Job["data"];
  native: Record<string, unknown>;
  nativeState: string;
  createdAt: number;
  extras: SwitchyardFields;
}

/**
 * Builds the document in node-cloudq 0.2's field order: the job object (klass, args and any extra
 * keys), then queue, the state field and inserted_at. The sub-document comes last, and only when
 * some field differs from its default.
 */
export function buildDocument(store: Store, queue: string, source: DocumentSource): Omit<CloudqDocument, "_id"> {
  const { args, wrapped, argsJson } = argsOf(source.data);
  const { topLevel, nativeJson } = placeNative(source.native);
  const switchyard = compact({ ...source.extras, wrapped, argsJson, nativeJson });
  const document = {
    klass: source.name,
    ...(args !== undefined ? { args } : {}),
    ...topLevel,
    queue,
    [store.layout.stateField]: source.nativeState,
    inserted_at: new Date(source.createdAt),
    ...(switchyard ? { switchyard } : {}),
  };
  checkSize(document);
  return document;
}

/** MongoDB's limit on one document; room is left for the `_id` and the fields reserve adds. */
const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024 - 4096;

function checkSize(document: Record<string, unknown>): void {
  const bytes = BSON.calculateObjectSize(document);
  if (bytes > MAX_DOCUMENT_BYTES) {
    throw new ValidationError(`cloudq-mongo: a job document may hold at most ${MAX_DOCUMENT_BYTES} bytes; this one needs ${bytes}`, {
      bytes,
    });
  }
}

/**
 * A bulk write failed after it had written part of the batch: removes what it wrote, so a batch
 * is all or nothing, and reports the failure as a typed error.
 */
export async function undoPartialWrite(store: Store, written: DocumentId[], error: unknown, what: string): Promise<never> {
  if (written.length > 0) await store.jobs.deleteMany({ _id: { $in: written } });
  if (isSwitchyardError(error)) throw error;
  const reason = error instanceof Error ? error.message : String(error);
  throw new BackendUnavailableError(`cloudq-mongo: ${what} failed and wrote nothing: ${reason}`, { cause: error });
}

function sourceOfInput(input: NormalizedEnqueueInput, now: number): DocumentSource {
  const runAt = runAtOf(input, now);
  return {
    name: input.name,
    data: input.data,
    native: input.native ?? {},
    nativeState: NATIVE.queued,
    createdAt: now,
    extras: {
      ...priorityFields(input.priority),
      runAt: runAt ?? undefined,
      maxAttempts: input.maxAttempts === DEFAULT_MAX_ATTEMPTS ? undefined : input.maxAttempts,
      backoff: input.backoff ?? undefined,
      tags: input.tags.length > 0 ? input.tags : undefined,
      uniqueKey: input.uniqueKey,
      dependsOn: input.dependsOn.length > 0 ? input.dependsOn : undefined,
    },
  };
}

export type InsertOutcome = { created: true; document: CloudqDocument } | { created: false; document: CloudqDocument };

export interface InsertRequest {
  queue: string;
  document: Omit<CloudqDocument, "_id">;
  /** A caller-chosen or imported id; a fresh ObjectId otherwise. */
  id?: string;
  /** When another unfinished job holds the unique key: return it (enqueue) or store without the slot (import). */
  onUniqueConflict: "return-holder" | "drop-slot";
}

const MAX_INSERT_ROUNDS = 8;

/**
 * Inserts one document, settling every unique-index conflict by looking at what holds it: the
 * same id in the same queue is returned as it is; an ObjectId taken by another queue moves the id
 * to `switchyard.id`; a unique key held by an unfinished job returns that job, and one left behind
 * by a job a legacy server marked deleted is released first.
 */
export async function insertDocument(store: Store, request: InsertRequest): Promise<InsertOutcome> {
  const { queue, id } = request;
  let document = { ...request.document };
  let useAlias = id !== undefined && asObjectId(id) === null;
  for (let round = 0; round < MAX_INSERT_ROUNDS; round++) {
    if (id !== undefined) {
      const existing = await findDocument(store, queue, id);
      if (existing) return { created: false, document: existing };
    }
    const _id = id !== undefined && !useAlias ? (asObjectId(id) as ObjectId) : new ObjectId();
    if (id !== undefined && useAlias) document = withExtras(document, { id, idSlot: idSlot(queue, id) });
    const candidate = { _id, ...document } as CloudqDocument;
    try {
      await store.jobs.insertOne(candidate);
      return { created: true, document: candidate };
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
    const slot = (document.switchyard as SwitchyardFields | undefined)?.uniqueSlot;
    if (slot !== undefined) {
      const holder = await store.jobs.findOne({ "switchyard.uniqueSlot": slot });
      if (holder && isUnfinished(store, holder)) {
        if (request.onUniqueConflict === "return-holder") return { created: false, document: holder };
        document = withExtras(document, { uniqueSlot: undefined });
        continue;
      }
      if (holder) await releaseUniqueSlot(store, holder);
    }
    if (id !== undefined && !useAlias && (await store.jobs.countDocuments({ _id, queue: { $ne: queue } }, { limit: 1 })) > 0) {
      useAlias = true;
    }
  }
  throw new ConflictError(`cloudq-mongo: could not insert a job into ${queue}: its id or unique key kept colliding`, { id });
}

export function withExtras(document: Omit<CloudqDocument, "_id">, extras: SwitchyardFields): Omit<CloudqDocument, "_id"> {
  const switchyard = compact({ ...(document.switchyard as SwitchyardFields | undefined), ...extras });
  const { switchyard: _old, ...rest } = document;
  return switchyard ? { ...rest, switchyard } : rest;
}

function isUnfinished(store: Store, document: CloudqDocument): boolean {
  return (UNFINISHED as unknown[]).includes(document[store.layout.stateField]);
}

async function releaseUniqueSlot(store: Store, holder: CloudqDocument): Promise<void> {
  const { stateField } = store.layout;
  await store.jobs.updateOne(
    { _id: holder._id, "switchyard.uniqueSlot": holder.switchyard?.uniqueSlot, [stateField]: { $nin: UNFINISHED } },
    { $unset: { "switchyard.uniqueSlot": "" } },
  );
}

export async function enqueueOne(store: Store, queue: string, input: NormalizedEnqueueInput): Promise<EnqueueResult> {
  return (await insertJob(store, queue, input)).result;
}

/** Enqueues one job; `written` is the `_id` of the document it created, if it created one. */
async function insertJob(
  store: Store,
  queue: string,
  input: NormalizedEnqueueInput,
): Promise<{ result: EnqueueResult; written?: DocumentId }> {
  const now = store.now();
  const source = sourceOfInput(input, now);
  if (input.uniqueKey !== undefined) source.extras.uniqueSlot = uniqueSlot(queue, input.uniqueKey);
  const blocked = input.dependsOn.length > 0 && (await unfinishedParents(store, queue, input.dependsOn)).length > 0;
  if (blocked) source.nativeState = NATIVE.blocked;
  const document = buildDocument(store, queue, source);
  const outcome = await insertDocument(store, {
    queue,
    document,
    ...(input.id !== undefined ? { id: input.id } : {}),
    onUniqueConflict: "return-holder",
  });
  let stored = outcome.document;
  // A parent may have completed between the check and the insert, with nobody left to release us.
  if (outcome.created && blocked && (await releaseIfReady(store, queue, stored))) {
    stored = (await store.jobs.findOne({ _id: stored._id })) ?? stored;
  }
  const result = { job: documentToJob(stored, store.layout.stateField, now), created: outcome.created };
  return outcome.created ? { result, written: stored._id } : { result };
}

/**
 * All or nothing: every document is built (and so checked) before anything is written, and a
 * write that fails midway is undone before the error is thrown. Plain jobs go in one insertMany;
 * jobs with an id, a unique key or parents are inserted one by one, as enqueue() does.
 */
export async function enqueueMany(store: Store, queue: string, inputs: NormalizedEnqueueInput[]): Promise<EnqueueResult[]> {
  const now = store.now();
  const documents = inputs.map(
    (input) => ({ _id: new ObjectId(), ...buildDocument(store, queue, sourceOfInput(input, now)) }) as CloudqDocument,
  );
  if (inputs.some((input) => input.id !== undefined || input.uniqueKey !== undefined || input.dependsOn.length > 0)) {
    const results: EnqueueResult[] = [];
    const written: DocumentId[] = [];
    try {
      for (const input of inputs) {
        const inserted = await insertJob(store, queue, input);
        results.push(inserted.result);
        if (inserted.written) written.push(inserted.written);
      }
    } catch (error) {
      return undoPartialWrite(store, written, error, "enqueueBulk");
    }
    return results;
  }
  try {
    if (documents.length > 0) await store.jobs.insertMany(documents, { ordered: true });
  } catch (error) {
    return undoPartialWrite(
      store,
      documents.map((document) => document._id),
      error,
      "enqueueBulk",
    );
  }
  return documents.map((document) => ({ job: documentToJob(document, store.layout.stateField, now), created: true }));
}
