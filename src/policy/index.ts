export { CEDAR_SCHEMA, POLICY_SCHEMA_NAME, TOOL_ACTIONS, type ToolAction } from "./schema.js";
export { ToolPolicy, MAX_POLICY_BYTES, type ToolDecision, type ToolRequest, type ToolVerdict } from "./tool-policy.js";
export { claudeToolCall, type ToolCall } from "./tool-call.js";
export { DecisionGate, type Answer, type DecisionGateOptions, type DecisionJournal, type PolicyDecisionEvent } from "./gate.js";
export { HOOK_SOURCE, claudeHookSettings, hookCommand } from "./hook.js";
