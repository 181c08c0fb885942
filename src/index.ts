export * from "./core/index.js";
export * from "./storage/index.js";
export * from "./journal/types.js";
