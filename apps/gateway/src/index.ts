export { createGateway, type Gateway, type GatewayOptions } from "./app.js";
export {
  loadConfig,
  parseConfig,
  defaultConfig,
  ConfigError,
  ConfigSchema,
  BACKEND_TYPES,
  DEFAULT_SQLITE_URL,
  type Config,
  type ConfigInput,
  type BackendType,
  type BackendSpec,
} from "./config.js";
export { defaultRegistry, type BackendFactory, type BackendRegistry } from "./backends.js";
export { QueueRouter, compilePattern } from "./router.js";
export { STATUS_BY_CODE } from "./errors.js";
export { startServer, type RunningServer, type ServerOptions } from "./server.js";
