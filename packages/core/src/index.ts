export * from "./job.js";
export * from "./errors.js";
export * from "./backend.js";
export * from "./validate.js";
export * from "./cursor.js";
export * from "./migrate.js";
