/** `import { ScriptedModelServer } from "warden/scripted-model"`: the scripted model server alone (node:http only). */
export { ScriptedModelServer, type ModelRequest, type ScriptedModelOptions } from "./server.js";
export { parseModelScript, type ModelScript, type ScriptTurn } from "./script.js";
export { SCRIPTED_MODEL, SCRIPTED_USAGE, type Protocol } from "./protocols.js";
