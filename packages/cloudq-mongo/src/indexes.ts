import type { Collection, Document, IndexDescription } from "mongodb";
import type { StateField } from "./options.js";
import { reserveSort } from "./queries.js";

/**
 * The indexes of the shared collection. No Mongo-era Cloudq server created any, so these are all
 * additions; each is plain MongoDB 5+ (compound, unique, sparse) and createIndexes is idempotent:
 * an index that already exists with the same name and keys is left alone.
 */
export function indexesFor(stateField: StateField): IndexDescription[] {
  return [
    // The legacy reserve ({queue, state: 'queued'} sorted by inserted_at) and the counts.
    { name: `cloudq_queue_${stateField}_inserted_at`, key: { queue: 1, [stateField]: 1, inserted_at: 1 } },
    // Switchyard's reserve: each branch of its $or is an equality on (queue, state) followed by
    // exactly the sort order, so the server merges ordered index scans instead of sorting.
    { name: `switchyard_reserve_${stateField}`, key: { queue: 1, ...reserveSort(stateField) } },
    // list() and export() page through a queue by _id.
    { name: "switchyard_queue_id", key: { queue: 1, _id: 1 } },
    // Sparse, because legacy documents have no sub-document and must not collide on a missing key.
    // (A partial index would say the same, but partialFilterExpression is not on every server that
    // speaks the protocol; a single-field sparse unique index is.)
    { name: "switchyard_unique_slot", key: { "switchyard.uniqueSlot": 1 }, unique: true, sparse: true },
    // The event feed reads the documents inserted or changed since its last look (event-feed.ts).
    { name: "switchyard_inserted_at", key: { inserted_at: 1 } },
    { name: "switchyard_updated_at", key: { updated_at: 1 } },
    { name: "switchyard_id_slot", key: { "switchyard.idSlot": 1 }, unique: true, sparse: true },
    // Which queues hold a caller-chosen id (queuesHolding: qless's jids are global).
    { name: "switchyard_id", key: { "switchyard.id": 1 }, sparse: true },
  ];
}

/**
 * The index of the recurring jobs' side collection: recurrences() of a queue in order, next due
 * first, ties by `_id` (the simple collation compares strings byte by byte, as Redis orders a
 * sorted set's ties).
 */
export const RECURRING_INDEXES: IndexDescription[] = [{ name: "switchyard_recurring_queue_next", key: { queue: 1, nextAt: 1, _id: 1 } }];

/**
 * Creates the indexes that are missing, one createIndexes command each. Asking the server to
 * create an index that exists is a no-op on MongoDB, but FerretDB 1.24 drops the connection when
 * one createIndexes command names several existing indexes, so existing names are skipped here.
 */
export async function ensureIndexes<T extends Document>(collection: Collection<T>, indexes: IndexDescription[]): Promise<void> {
  const existing = new Set(
    (
      await collection
        .listIndexes()
        .toArray()
        .catch(() => [])
    ).map((index) => String(index.name)),
  );
  for (const index of indexes) {
    if (!existing.has(index.name as string)) await collection.createIndexes([index]);
  }
}
