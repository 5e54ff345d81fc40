export { createWorkerQueueBackend, WORKERQUEUE_CAPABILITIES } from "./backend.js";
export type { DataFormat, Dialect, SqliteSynchronous, WorkerQueueBackendOptions } from "./options.js";
export { decodeData, encodeData } from "./encoding.js";
export { DELAYED_LOCK, MYSQL_DELAYED_LOCK, STATUS, SY } from "./columns.js";
export { workerQueueAdapter } from "./descriptor.js";
export { type LegacyMaster, parseLegacyMaster, DEFAULT_MASTER_PORTS } from "./wake.js";
