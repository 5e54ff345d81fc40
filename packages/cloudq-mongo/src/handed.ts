import { setNewest } from "@switchyard/core";
import type { CloudqDocument } from "./document.js";
import type { Store } from "./store.js";

/**
 * The documents of the jobs this backend handed out, as their claim left them (and as this
 * backend's heartbeats and progress reports changed them since). In `mark-deleted` mode a
 * completion of such a job is one update statement that can share a command with the next claims
 * (see completionStatement in transitions.ts): an update answers no document, so the completed
 * job is answered from this one, and the statement's filter pins every field that can change
 * while the job is held, so a stale entry makes the statement fail rather than answer wrongly.
 * Bounded: the oldest entries go first.
 */
const MAX_ENTRIES = 10_000;

const handed = new WeakMap<Store, Map<string, CloudqDocument>>();

function key(queue: string, id: string): string {
  return `${queue}\u0000${id}`;
}

export function rememberHanded(store: Store, queue: string, id: string, document: CloudqDocument): void {
  let byKey = handed.get(store);
  if (!byKey) {
    byKey = new Map();
    handed.set(store, byKey);
  }
  setNewest(byKey, key(queue, id), document, MAX_ENTRIES);
}

/** Replaces the entry of a job this backend handed out (heartbeat, progress); others are not added. */
export function refreshHanded(store: Store, queue: string, id: string, document: CloudqDocument): void {
  if (handed.get(store)?.has(key(queue, id))) rememberHanded(store, queue, id, document);
}

export function handedDocument(store: Store, queue: string, id: string): CloudqDocument | undefined {
  return handed.get(store)?.get(key(queue, id));
}

export function forgetHanded(store: Store, queue: string, id: string): void {
  handed.get(store)?.delete(key(queue, id));
}
