export {
  type QlessReply,
  QlessScriptError,
  callQless,
  callQlessRaw,
  formatNow,
  qlessErrorMessage,
  qlessScript,
  qlessScriptSource,
} from "./script.js";
