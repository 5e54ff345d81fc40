import type { Redis } from "ioredis";

/** Commands the server has run that match, watched over MONITOR on a connection of its own. */
export interface CommandWatch {
  count(): number;
  stop(): void;
}

export async function watchCommands(redis: Redis, matches: (args: string[]) => boolean): Promise<CommandWatch> {
  const monitor = await redis.monitor();
  let seen = 0;
  monitor.on("monitor", (_time: string, args: string[]) => {
    if (matches(args)) seen++;
  });
  return { count: () => seen, stop: () => monitor.disconnect() };
}
