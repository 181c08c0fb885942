export * from "./secure-fs.js";
export * from "./lock.js";
export * from "./room.js";
export * from "./descriptor-paths.js";
