import type { MigrationProgress } from "@switchyard/core";
import { MultiBar, Presets } from "cli-progress";
import type { CliIo } from "../cli-io.js";

/** How a migration shows its progress: a bar per queue on a terminal, JSON lines otherwise. */
export interface ProgressView {
  /** A queue starts; `total` is the source's count of its jobs then (a live queue may change). */
  start(queue: string, total: number): void;
  page(queue: string, progress: MigrationProgress): void;
  stop(): void;
}

const ratePerSecond = (read: number, since: number) => Math.round(read / Math.max(0.001, (Date.now() - since) / 1000));

/** One JSON object per page on stderr, `{queue, read, imported, skipped, excluded, removed, leftActive, total, rate, byState}`, for a script to follow. */
function jsonLines(io: CliIo): ProgressView {
  const started = new Map<string, { at: number; total: number }>();
  return {
    start(queue, total) {
      started.set(queue, { at: Date.now(), total });
    },
    page(queue, progress) {
      const { at = Date.now(), total = 0 } = started.get(queue) ?? {};
      const { read, imported, skipped, excluded, removed, leftActive, byState } = progress;
      const line = { queue, read, imported, skipped, excluded, removed, leftActive, total, rate: ratePerSecond(read, at), byState };
      io.err(`${JSON.stringify(line)}\n`);
    },
    stop() {},
  };
}

/** A bar per queue on the terminal (cli-progress): jobs read of the total, rate, ETA, imported and skipped. */
function bars(stream: NodeJS.WriteStream): ProgressView {
  const multibar = new MultiBar(
    {
      stream,
      clearOnComplete: false,
      hideCursor: true,
      format:
        "{queue} |{bar}| {value}/{total} jobs | {rate} jobs/s | ETA {eta_formatted} | imported {imported}, skipped {skipped} | {states}",
    },
    Presets.shades_classic,
  );
  const open = new Map<string, { bar: ReturnType<MultiBar["create"]>; at: number }>();
  return {
    start(queue, total) {
      open.set(queue, { bar: multibar.create(total, 0, { queue, rate: 0, imported: 0, skipped: 0, states: "" }), at: Date.now() });
    },
    page(queue, progress) {
      const entry = open.get(queue);
      if (!entry) return;
      if (progress.read > entry.bar.getTotal()) entry.bar.setTotal(progress.read);
      const states = Object.entries(progress.byState)
        .map(([state, n]) => `${state} ${n}`)
        .join(", ");
      entry.bar.update(progress.read, {
        rate: ratePerSecond(progress.read, entry.at),
        imported: progress.imported,
        skipped: progress.skipped,
        states,
      });
    },
    stop() {
      multibar.stop();
    },
  };
}

export function progressView(io: CliIo): ProgressView {
  return io.progressStream?.isTTY ? bars(io.progressStream) : jsonLines(io);
}
