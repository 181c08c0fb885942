/** HTTP API v1 wire schemas: the single source of truth for validation, docs and client types. */
export * from "./common.js";
export * from "./problem.js";
export * from "./delivery.js";
export * from "./invocations.js";
export * from "./runs.js";
export * from "./log.js";
export * from "./validation.js";
export * from "./console.js";
