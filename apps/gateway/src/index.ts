export { createGateway, type Gateway, type GatewayOptions } from "./app.js";
export {
  loadConfig,
  parseConfig,
  defaultConfig,
  ConfigError,
  configSchema,
  DEFAULT_SQLITE_URL,
  type Config,
  type ConfigInput,
  type BackendSpec,
} from "./config.js";
export { ADAPTERS } from "./adapters.js";
export { QueueRouter, compilePattern } from "./router.js";
export { STATUS_BY_CODE } from "./errors.js";
export { startServer, type RunningServer, type ServerOptions } from "./server.js";
