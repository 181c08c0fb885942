export * from "./types.js";
export * from "./profiles.js";
export * from "./binding.js";
export * from "./codex-config.js";
export * from "./materializer.js";
export { validateSessionName, isSessionName } from "./sessions.js";
