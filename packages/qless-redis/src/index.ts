export { QLESS_CAPABILITIES, type QlessBackend, createQlessBackend } from "./backend.js";
export { translateError } from "./errors.js";
export {
  type ImportRecord,
  type QlessJobJson,
  type SwitchyardDocument,
  type SwitchyardMeta,
  toCoreJob,
  toImportRecord,
} from "./job-mapping.js";
export type { QlessBackendOptions } from "./options.js";
export {
  QlessScriptError,
  callQless,
  callQlessRaw,
  formatNow,
  qlessErrorMessage,
  qlessLibrary,
  qlessScript,
  qlessScriptSource,
} from "./script.js";
export type { QlessReply } from "@switchyard/core";
export { qlessAdapter } from "./descriptor.js";
