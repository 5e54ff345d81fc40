/**
 * Runs a release of due delayed jobs every `everyMs`, one at a time, without keeping the process
 * alive: a delayed job must become runnable for the legacy daemons even when no Switchyard worker
 * ever calls reserve() on the table.
 */
export class ReleaseTimer {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly release: () => Promise<number>,
    private readonly everyMs: number,
    private readonly onReleased: (count: number) => void,
    private readonly onError: (error: Error) => void,
  ) {}

  start(): void {
    if (this.everyMs <= 0 || this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private async tick(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const released = await this.release();
      if (released > 0) this.onReleased(released);
    } catch (error) {
      this.onError(error as Error);
    } finally {
      this.running = false;
    }
  }
}
