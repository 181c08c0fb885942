export * from "./errors.js";
export * from "./digest.js";
export * from "./canonical.js";
export * from "./limits.js";
