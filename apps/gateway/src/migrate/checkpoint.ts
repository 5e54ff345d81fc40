import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import type { MigrationChecksums } from "@switchyard/core";

/** Where one queue's migration stands. */
export interface QueueCheckpoint {
  /** The source's export cursor after the last page the target holds; null before the first page. */
  cursor: string | null;
  done: boolean;
  read: number;
  imported: number;
  skipped: number;
  /** Moving: jobs deleted from the source. */
  removed: number;
  /** The checksums of the pages up to `cursor`, which a resumed run goes on summing (absent in older checkpoints). */
  checksums?: MigrationChecksums;
}

/** A migration's progress on disk, so one killed at any point resumes where it stood. */
export interface Checkpoint {
  from: string;
  to: string;
  queues: Record<string, QueueCheckpoint>;
}

export function readCheckpoint(path: string): Checkpoint | null {
  if (!existsSync(path)) return null;
  return JSON.parse(readFileSync(path, "utf8")) as Checkpoint;
}

/**
 * Written to a temporary file and renamed over the old one: a kill -9 mid-write leaves the previous
 * checkpoint whole. A page imported after the last write is imported again on resume, and skipped,
 * since the target already holds its ids.
 */
export function writeCheckpoint(path: string, checkpoint: Checkpoint): void {
  const temporary = `${path}.tmp`;
  writeFileSync(temporary, JSON.stringify(checkpoint));
  renameSync(temporary, path);
}
