/**
 * The pieces of a governed Codex run that need no CLI (the real Codex runs them end to end in
 * test/agents/codex-policy.test.ts): its hook input read as warden's actions, its printed command
 * lines unwrapped, its items paired with the hook's call ids, and its run home's config.toml.
 * Inputs are codex-cli 0.171's own, as measured against the scripted model.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { hookToolCall } from "../../src/policy/tool-call.js";
import { CodexCalls, shellCommandOf, shellWords } from "../../src/runner/codex-calls.js";
import type { ParsedEvent } from "../../src/runner/events.js";
import { RunHomes } from "../../src/providers/run-home.js";
import { DEFAULT_PROVIDER_PROFILES } from "../../src/providers/profiles.js";
import { tempDir } from "../support/temp.js";

const envelope = (tool_name: string, tool_input: unknown, tool_use_id = "call_abc123", cwd = "/srv/ws"): Record<string, unknown> => ({
  session_id: "s",
  turn_id: "t",
  transcript_path: null,
  cwd,
  hook_event_name: "PreToolUse",
  model: "scripted-model",
  permission_mode: "bypassPermissions",
  tool_name,
  tool_input,
  tool_use_id,
});

describe("codex hook input as warden's tool calls", () => {
  it("Bash is shell with its command; the call id is codex:<tool_use_id>; cwd (the model's workdir) resolves paths", () => {
    const call = hookToolCall("codex", envelope("Bash", { command: "git push origin main" }, "call_scripted_4", "/tmp"), "/srv/ws");
    assert.equal(call.callId, "codex:call_scripted_4");
    assert.equal(call.action, "shell");
    assert.equal(call.resource.command, "git push origin main");
  });

  it("apply_patch is file.edit over the files its patch names; view_image file.read; write_stdin shell; mcp__s__t mcp; others other", () => {
    const patch = "*** Begin Patch\n*** Update File: src/a.ts\n@@\n-x\n+y\n*** Add File: /srv/deploy/b.ts\n+z\n*** Delete File: c.ts\n*** End Patch\n";
    const edit = hookToolCall("codex", envelope("apply_patch", { command: patch }), "/srv/ws");
    assert.equal(edit.action, "file.edit");
    assert.deepEqual(edit.resource.paths, ["/srv/ws/src/a.ts", "/srv/deploy/b.ts", "/srv/ws/c.ts"]);
    assert.equal(edit.resource.path, "/srv/ws/src/a.ts");
    assert.equal(edit.resource.command, "", "a patch is not a command line");
    const image = hookToolCall("codex", envelope("view_image", { path: "x.png" }), "/srv/ws");
    assert.deepEqual([image.action, image.resource.path], ["file.read", "/srv/ws/x.png"]);
    const typed = hookToolCall("codex", envelope("write_stdin", { session_id: 3, chars: "git push\n" }), "/srv/ws");
    assert.deepEqual([typed.action, typed.resource.command], ["shell", "git push\n"]);
    const mcp = hookToolCall("codex", envelope("mcp__repo__deploy", { env: "prod" }), "/srv/ws");
    assert.deepEqual([mcp.action, mcp.resource.mcp_server, mcp.resource.mcp_tool], ["mcp", "repo", "deploy"]);
    assert.equal(hookToolCall("codex", envelope("request_user_input", {}), "/srv/ws").action, "other");
    // Claude's names mean Claude's tools only: a codex `Read` is no file read.
    assert.equal(hookToolCall("codex", envelope("Read", { file_path: "/etc/passwd" }), "/srv/ws").action, "other");
  });
});

describe("codex command lines", () => {
  it("unwraps <shell> -lc <command> as Codex prints it, quotes and all", () => {
    assert.equal(shellCommandOf("/bin/bash -lc 'echo hi > out.txt'"), "echo hi > out.txt");
    // Printed by codex-cli 0.171 for `echo 'a b' "c" > q.txt; echo $HOME`.
    assert.equal(shellCommandOf(`/bin/bash -lc "echo 'a b' \\"c\\" > q.txt; echo "'$HOME'`), `echo 'a b' "c" > q.txt; echo $HOME`);
    assert.equal(shellCommandOf("/bin/zsh -c ls"), "ls");
    assert.equal(shellCommandOf("ls -la"), undefined);
    assert.equal(shellCommandOf("/bin/bash -lc 'unclosed"), undefined);
    assert.deepEqual(shellWords(`a\\ b "c\\$d" ''`), ["a b", "c$d", ""]);
  });
});

describe("codex items paired with the hook's calls", () => {
  const call = (id: string, tool: string, command: string) => hookToolCall("codex", envelope(tool, { command }, id), "/srv/ws");
  const idOf = (e: ParsedEvent): string | undefined => (e.type === "start" || e.type === "finish" ? e.id : undefined);
  const start = (item: string, command: string): ParsedEvent => ({ type: "start", id: `codex:${item}`, name: "command_execution", fingerprint: "sha256:x", command: `/bin/bash -lc '${command}'` });

  it("an item takes the id of the allowed call with its command; its finish follows; an unpaired item keeps its own", () => {
    const calls = new CodexCalls();
    assert.deepEqual(calls.decided(call("call_1", "Bash", "make"), true), []);
    assert.deepEqual(calls.decided(call("call_2", "Bash", "make test"), true), []);
    // Items may start in another order than their decisions (parallel calls).
    assert.equal(idOf(calls.paired(start("item_7", "make test"))), "codex:call_2");
    assert.equal(idOf(calls.paired(start("item_8", "make"))), "codex:call_1");
    assert.deepEqual(calls.paired({ type: "finish", id: "codex:item_7", outcome: "succeeded" }), { type: "finish", id: "codex:call_2", outcome: "succeeded" });
    // No decision left: an item the hook never saw keeps its own id (and verification names it).
    assert.equal(idOf(calls.paired(start("item_9", "curl evil"))), "codex:item_9");
    // An allow for a harmless command (an agent can register one on its socket) covers no other.
    calls.decided(call("call_3", "Bash", "ls"), true);
    assert.equal(idOf(calls.paired(start("item_10", "git push"))), "codex:item_10");
    // A line that is not `<shell> -c <command>` takes the oldest of its kind.
    assert.equal(idOf(calls.paired({ type: "start", id: "codex:item_12", name: "command_execution", fingerprint: "sha256:x", command: "ls -la" })), "codex:call_3");
    // An MCP item pairs only with an MCP decision.
    calls.decided(call("call_4", "Bash", "ls"), true);
    assert.equal(idOf(calls.paired({ type: "start", id: "codex:item_11", name: "mcp:repo/deploy", fingerprint: "sha256:x" })), "codex:item_11");
  });

  it("a call not allowed is journaled from its decision: started, then failed", () => {
    const events = new CodexCalls().decided(call("call_5", "Bash", "git push"), false);
    assert.deepEqual(events, [
      { type: "start", id: "codex:call_5", name: "command_execution", fingerprint: call("call_5", "Bash", "git push").fingerprint },
      { type: "finish", id: "codex:call_5", outcome: "failed" },
    ]);
  });
});

describe("a governed codex run's home", () => {
  const root = tempDir("codex-hook-home");
  after(() => rmSync(root, { recursive: true, force: true }));

  it("config.toml runs the hook before every tool call, hosted web search off; the launch bypasses Codex's hook trust", async () => {
    const homes = new RunHomes(join(root, "homes"));
    const profile = DEFAULT_PROVIDER_PROFILES.codex;
    const governed = await homes.create({ run: "run-governed", provider: "codex", profile, workspace: "/srv/ws", trusted: true, preToolHook: "node -e 'x' /run/warden/decide.sock" });
    const config = parseToml(readFileSync(join(governed.env.CODEX_HOME as string, "config.toml"), "utf8")) as Record<string, unknown>;
    assert.equal(config.web_search, "disabled");
    assert.deepEqual(JSON.parse(JSON.stringify(config.hooks)), {
      PreToolUse: [{ matcher: "*", hooks: [{ type: "command", command: "node -e 'x' /run/warden/decide.sock", timeout: 120 }] }],
    });
    assert.deepEqual(JSON.parse(JSON.stringify(config.projects)), { "/srv/ws": { trust_level: "trusted" } });
    assert.deepEqual(governed.args, ["--dangerously-bypass-hook-trust"]);
    const open = await homes.create({ run: "run-open", provider: "codex", profile, workspace: "/srv/ws", trusted: false });
    const plain = parseToml(readFileSync(join(open.env.CODEX_HOME as string, "config.toml"), "utf8")) as Record<string, unknown>;
    assert.equal(plain.hooks, undefined);
    assert.equal(plain.web_search, undefined);
    assert.deepEqual(open.args, []);
  });
});
