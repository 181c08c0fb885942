export * from "./listen.js";
export * from "./schema.js";
export * from "./serve-config.js";
export * from "./tokens.js";
