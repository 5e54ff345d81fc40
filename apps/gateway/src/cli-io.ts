/** Where a command writes and what environment it reads; tests pass their own. */
export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
  env: Record<string, string | undefined>;
  /** Where `serve` writes its request log; stdout when absent. */
  logTo?: NodeJS.WritableStream;
  /** A terminal for progress bars (the CLI's stderr); JSON lines go to `err` when absent or not a TTY. */
  progressStream?: NodeJS.WriteStream;
}
