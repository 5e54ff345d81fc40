export { createCloudqBackend, capabilitiesFor } from "./backend.js";
export type { CloudqBackendOptions, CloudqLayoutOptions, CompletionMode, StateField } from "./options.js";
export { COMPLETION_MODES, STATE_FIELDS } from "./options.js";
export { NATIVE as CLOUDQ_STATES, type CloudqDocument, type SwitchyardFields } from "./document.js";
export { RECURRING_INDEXES, indexesFor } from "./indexes.js";
export { cloudqAdapter } from "./descriptor.js";
