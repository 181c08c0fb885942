export * from "./types.js";
export * from "./keys.js";
export * from "./schema.js";
export * from "./lifecycle.js";
export * from "./line.js";
export * from "./writer.js";
export * from "./verify.js";
export * from "./inspect.js";
