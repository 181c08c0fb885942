export * from "./request.js";
export * from "./events.js";
export * from "./runner.js";
export * from "./orphans.js";
