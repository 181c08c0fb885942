export { CEDAR_SCHEMA, POLICY_SCHEMA_NAME, TOOL_ACTIONS, type ToolAction } from "./schema.js";
export { ToolPolicy, MAX_POLICY_BYTES, type ToolDecision, type ToolRequest, type ToolVerdict } from "./tool-policy.js";
export { claudeToolCall, hookToolCall, type HookProvider, type ToolCall } from "./tool-call.js";
export { DecisionGate, type Answer, type DecisionGateOptions, type DecisionJournal, type PolicyDecisionEvent } from "./gate.js";
export { CODEX_HOOK_TRUST_ARGS, HOOK_SOURCE, claudeHookSettings, codexHookConfig, hookCommand } from "./hook.js";
