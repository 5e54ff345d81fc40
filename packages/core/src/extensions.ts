import type { Backend } from "./backend.js";

/**
 * Optional interfaces: what only some systems have. A door that needs one discovers it on the
 * backend with its guard and answers 501 with the reason when it is absent; no door imports an
 * adapter package.
 */

/** A reply of a qless command as Redis returns it: bulk strings, integers, nil, and lists of those. */
export type QlessReply = string | number | null | QlessReply[];

/** A qless command refused by qless's own rules; the message is qless's, for a qless client to show. */
export class QlessCommandError extends Error {
  readonly command: string;
  constructor(command: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "QlessCommandError";
    this.command = command;
  }
}

/**
 * qless's command API, run verbatim (`put`, `pop`, `heartbeat`, `complete`... with qless's
 * argument order), as on a store that holds the qless layout. A qless refusal rejects with
 * QlessCommandError; a store failure with the core's typed errors.
 */
export interface QlessCommands {
  qless(command: string, now: number | string, ...args: Array<string | number>): Promise<QlessReply>;
}

export function hasQlessCommands(backend: Backend): backend is Backend & QlessCommands {
  return typeof (backend as Partial<QlessCommands>).qless === "function";
}
