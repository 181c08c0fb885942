import { ToolPolicy } from "./src/policy/tool-policy.js";
const p = ToolPolicy.compile(`@id("push") forbid(principal, action == Action::"shell", resource) when { resource.command like "*git push*" };
@id("all") permit(principal, action, resource);`, "x.cedar");
const base = { principal: { scope: "api:op", name: "op", role: "operator" }, action: "shell" as const, callId: "claude:1", resource: { tool: "Bash", command: "git push origin main", paths: [], host: "", url: "", mcp_server: "", mcp_tool: "" }, context: { workspace: "main", run: "r", provider: "claude", bundle_id: "", revision: 0, signers: [] } };
for (let i = 0; i < 200; i++) p.decide(base);
const t = performance.now(); for (let i = 0; i < 2000; i++) p.decide(base); console.log((performance.now() - t) / 2000, "ms");
