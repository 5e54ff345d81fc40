// Types of what scripts/services.mjs exports, for the TypeScript test suites that import it.
import type { ChildProcess } from "node:child_process";

export declare const ALL_SERVICES: string[];
/** Where the FerretDB binary is built, once, by installMissing(). */
export declare const FERRETDB_BIN: string;

/** A child started by launch(): its stdout and stderr go to `logFile`. */
export type LaunchedChild = ChildProcess & { logFile: string };

export declare function installMissing(names?: string[]): void;
export declare function freePort(): Promise<number>;
export declare function freeClusterPort(): Promise<number>;
/** A PostgreSQL tool (initdb, postgres, psql) from the newest installed version, or from PATH. */
export declare function pgBin(tool: string): string | null;
/** The user PostgreSQL runs as when the tests run as root (created if absent); undefined otherwise. */
export declare function postgresUser(): string | undefined;
export declare function waitForPort(port: number, what: string, child?: LaunchedChild, seconds?: number): Promise<void>;
export declare function launch(
  command: string,
  args: string[],
  options: { dir: string; name: string; detached?: boolean; user?: string | undefined },
): LaunchedChild;
export declare function startServices(
  names?: string[],
  options?: { detached?: boolean },
): Promise<{ env: Record<string, string>; dir: string; pids: number[]; stop(): void }>;
