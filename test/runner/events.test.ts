import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { eventReader, stderrReader, type ParsedEvent } from "../../src/runner/events.js";
import { hookToolCall } from "../../src/policy/tool-call.js";
import { canonicalDigest } from "../../src/core/canonical.js";
import { sha256Digest } from "../../src/core/digest.js";

// Lines printed by the real CLIs (claude 2.1.197 and codex-cli 0.171.0, offline, so the model
// call itself fails): none of them is a tool call.
const REAL_CLAUDE = [
  '{"type":"system","subtype":"init","cwd":"/tmp/x","session_id":"f0ec839a-f915-45f1-afad-f5ebde7be539","tools":["Task","Bash"],"mcp_servers":[{"name":"plugin:review-tools:files","status":"failed"}],"model":"claude-opus-4-8[1m]","permissionMode":"default","slash_commands":["review-tools:lint"],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","output_style":"default","agents":["Explore"],"skills":["review-tools:lint","review-tools:review"],"plugins":[{"name":"review-tools","path":"/tmp/x/b","source":"review-tools@inline"}],"uuid":"a343f629-ff8d-4711-b70c-cbd5119c950b"}',
  '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":509.3,"error_status":null,"error":"unknown","session_id":"f0ec839a-f915-45f1-afad-f5ebde7be539","uuid":"ce6a340a-81d6-4049-9b3d-7f4a49ec401d"}',
];
const REAL_CODEX = [
  '{"type":"thread.started","thread_id":"01a227eb-252d-7032-acf0-f1c416466e61"}',
  '{"type":"turn.started"}',
  '{"type":"error","message":"Reconnecting... 2/5 (stream disconnected before completion: Connection refused (os error 111))"}',
  '{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Falling back from WebSockets to HTTPS transport."}}',
];

const label = (e: ParsedEvent): string =>
  e.type === "start" ? `start:${e.id}:${e.name}` : e.type === "finish" ? `finish:${e.id}:${e.outcome}` : e.type;
const tools = (events: ParsedEvent[]): ParsedEvent[] => events.filter((e) => e.type === "start" || e.type === "finish");

describe("event readers", () => {
  it("real CLI lines without tool calls yield no effects; what they say is kept as notes", () => {
    const claude = eventReader("claude-stream-json")!;
    const codex = eventReader("codex-jsonl")!;
    const fromClaude = REAL_CLAUDE.flatMap(claude);
    const fromCodex = REAL_CODEX.flatMap(codex);
    assert.deepEqual(tools(fromClaude), []);
    assert.deepEqual(tools(fromCodex), []);
    // The CLI's session (a trace's gen_ai.conversation.id): Claude Code's session_id, Codex's thread_id.
    assert.deepEqual(fromClaude.map(label), ["note", "session", "note"]);
    assert.deepEqual(fromClaude[1], { type: "session", id: "f0ec839a-f915-45f1-afad-f5ebde7be539" });
    // The init line says which skills and plugins the CLI loaded; a retry is an event of its own.
    assert.deepEqual(fromClaude[0]?.type === "note" ? fromClaude[0].note.agent_session : undefined, {
      provider: "claude",
      model: "claude-opus-4-8[1m]",
      permissionMode: "default",
      claude_code_version: "2.1.197",
      skills: ["review-tools:lint", "review-tools:review"],
      plugins: ["review-tools"],
    });
    assert.deepEqual(fromClaude[2]?.type === "note" ? (fromClaude[2].note.provider_event as { subtype: string }).subtype : undefined, "api_retry");
    // codex: a reconnect message and an `error` item are warnings it went on after: notes, not errors.
    assert.deepEqual(fromCodex.map(label), ["session", "note", "note"]);
    assert.deepEqual(fromCodex[0], { type: "session", id: "01a227eb-252d-7032-acf0-f1c416466e61" });
    assert.equal(eventReader("text"), undefined);
  });

  it("unknown event types of either CLI are notes, bounded, never errors", () => {
    const long = "x".repeat(5000);
    const claude = eventReader("claude-stream-json")!(JSON.stringify({ type: "brand_new", text: long, nested: { a: 1 } }));
    assert.deepEqual(claude.map(label), ["note"]);
    const note = claude[0]?.type === "note" ? (claude[0].note.provider_event as Record<string, unknown>) : {};
    assert.equal(note.type, "brand_new");
    assert.equal((note.text as string).length, 513);
    assert.equal(note.nested, undefined);
    const codex = eventReader("codex-jsonl")!;
    assert.deepEqual([JSON.stringify({ type: "thread.renamed", name: "n" }), JSON.stringify({ type: "item.completed", item: { id: "i", type: "hologram" } })].flatMap(codex).map(label), ["note", "note"]);
  });

  it("claude: the result line is the answer, its usage and, when is_error, an error", () => {
    const read = eventReader("claude-stream-json")!;
    const ok = read('{"type":"result","subtype":"success","is_error":false,"result":"done","usage":{"input_tokens":200,"output_tokens":20,"cache_read_input_tokens":0,"service_tier":"standard"}}');
    assert.deepEqual(ok.filter((e) => e.type !== "report" && e.type !== "turn"), [
      { type: "usage", usage: { input_tokens: 200, output_tokens: 20, cache_read_input_tokens: 0 } },
      { type: "answer", text: "done" },
    ]);
    // Claude Code 2.1.328 after a dropped model connection: subtype success, is_error true.
    const failed = read('{"type":"result","subtype":"success","is_error":true,"result":"API Error: 400 no turn","terminal_reason":"api_error"}');
    assert.deepEqual(failed.map(label), ["report", "answer", "error"]);
    assert.deepEqual(read('{"type":"result","subtype":"error_max_turns","is_error":false}').map(label), ["report", "error"]);
  });

  it("claude: a call's fingerprint is the decision point's for the same call, even nested past canonical JSON's depth", () => {
    // A resumed run journals its parked call's effect with the fingerprint its decision took from
    // the hook's input (runner.ts, tools.resumed): the two readers must agree on every input.
    let deep: unknown = "bottom";
    for (let i = 0; i < 80; i++) deep = { d: deep };
    for (const input of [{ command: "git push" }, { command: "x", nested: deep }]) {
      const started = eventReader("claude-stream-json")!(JSON.stringify({ type: "assistant", message: { content: [{ type: "tool_use", id: "toolu_7", name: "Bash", input }] } }));
      const fromStream = started[0]?.type === "start" ? started[0].fingerprint : undefined;
      const fromHook = hookToolCall("claude", { hook_event_name: "PreToolUse", tool_name: "Bash", tool_use_id: "toolu_7", tool_input: input, cwd: "/w" }, "/w").fingerprint;
      assert.equal(fromStream, fromHook);
    }
    // Past a nesting of 64, canonical JSON refuses: the JSON text identifies the call instead.
    assert.throws(() => canonicalDigest({ name: "Bash", input: { nested: deep } }));
    assert.equal(hookToolCall("claude", { hook_event_name: "PreToolUse", tool_name: "Bash", tool_use_id: "t", tool_input: { nested: deep } }, "/w").fingerprint, sha256Digest(JSON.stringify({ name: "Bash", input: { nested: deep } })));
  });

  it("claude: a tool call its permission mode refused is a failed call marked refused", () => {
    const read = eventReader("claude-stream-json")!;
    read('{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_9","name":"Bash","input":{"command":"echo hi > out.txt"}}]}}');
    // As Claude Code 2.1.328 prints it in dontAsk mode.
    const meta = read(
      '{"type":"user","message":{"content":[{"type":"tool_result","content":"Permission to use Bash has been denied because Claude Code is running in don\'t ask mode.","is_error":true,"tool_use_id":"toolu_9"}]},"tool_result_meta":[{"id":"toolu_9","non_execution_kind":"permission-rule","permission_decision":{"decision":"reject","source":"config","reason_type":"mode"}}]}',
    );
    assert.deepEqual(meta, [{ type: "finish", id: "claude:toolu_9", outcome: "failed", refused: "permission reject (mode)", detail: { is_error: true, refused: "permission reject (mode)" } }]);
    // Without the meta, the CLI's own words: the refusal the issue met in the default mode.
    const text = read(
      '{"type":"user","message":{"content":[{"type":"tool_result","content":"Output redirection to \'/w/out.txt\' needs approval. Claude Code asks before a shell command creates files","is_error":true,"tool_use_id":"toolu_8"}]}}',
    );
    assert.equal(text[0]?.type === "finish" ? text[0].refused : undefined, "permission denied");
    // A tool that ran and failed is failed, not refused.
    const plain = read('{"type":"user","message":{"content":[{"type":"tool_result","content":"Exit code 1","is_error":true,"tool_use_id":"toolu_7"}]}}');
    assert.equal(plain[0]?.type === "finish" ? plain[0].refused : "x", undefined);
  });

  it("codex: the last agent_message is the answer, turn.failed an error, declined a refusal", () => {
    const read = eventReader("codex-jsonl")!;
    const events = [
      '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"first"}}',
      '{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"rm -rf /","status":"declined"}}',
      '{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"second"}}',
      '{"type":"turn.failed","error":{"message":"stream disconnected"}}',
    ].flatMap(read);
    assert.deepEqual(events.map(label), ["answer", "start:codex:item_2:command_execution", "finish:codex:item_2:failed", "answer", "error"]);
    assert.equal(events[2]?.type === "finish" ? events[2].refused : undefined, "declined");
  });

  it("codex: a command its own sandbox could not start is a provider-sandbox-failed error; a command failing inside it is not", () => {
    const read = eventReader("codex-jsonl")!;
    // Printed by codex-cli 0.171.0 with Debian's bubblewrap and CODEX_HOME under the temporary directory.
    const failed = read(
      '{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc \'echo hi > out.txt\'","aggregated_output":"bwrap: execvp codex-linux-sandbox: No such file or directory\\n","exit_code":1,"status":"failed"}}',
    );
    assert.deepEqual(failed.map(label), ["start:codex:item_1:command_execution", "finish:codex:item_1:failed", "error"]);
    const error = failed[2];
    assert.ok(error?.type === "error");
    assert.equal(error.code, "provider-sandbox-failed");
    assert.match(error.message, /sandbox could not start.*bwrap: execvp codex-linux-sandbox: No such file or directory$/);
    // A read-only sandbox refusing a write: the command ran, and failed; no sandbox failure.
    const ran = read(
      '{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc \'echo no > x\'","aggregated_output":"/bin/bash: line 1: x: Read-only file system\\n","exit_code":1,"status":"failed"}}',
    );
    assert.deepEqual(ran.map(label), ["start:codex:item_2:command_execution", "finish:codex:item_2:failed"]);
    // Its warning on stderr says the same before any command (and codex may print no item at all).
    const readErr = stderrReader("codex-jsonl")!;
    const warned = readErr(
      'WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries under temporary dir "/tmp" (codex_home: AbsolutePathBuf("/tmp/h/.codex"))',
    );
    assert.deepEqual(warned.map((e) => (e.type === "error" ? e.code : e.type)), ["provider-sandbox-failed"]);
    assert.deepEqual(readErr("Reading additional input from stdin..."), []);
    assert.equal(stderrReader("claude-stream-json"), undefined);
  });

  it("claude: tool_use starts, tool_result finishes, is_error is a failure; noise is ignored", () => {
    const read = eventReader("claude-stream-json")!;
    const lines = [
      "not json",
      "",
      '{"type":"assistant","message":{"content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","id":"toolu_2","name":"Read","input":{"file_path":"/x"}}]}}',
      '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a\\nb"},{"type":"tool_result","tool_use_id":"toolu_2","content":"no","is_error":true}]}}',
    ];
    const events = lines.flatMap(read);
    assert.deepEqual(events.map(label), [
      "start:claude:toolu_1:Bash",
      "start:claude:toolu_2:Read",
      "finish:claude:toolu_1:succeeded",
      "finish:claude:toolu_2:failed",
    ]);
    const first = events[0];
    const again = read(lines[2] as string)[0];
    // The fingerprint identifies the call (name and input), not the moment.
    assert.ok(first?.type === "start" && again?.type === "start" && first.fingerprint === again.fingerprint);
  });

  it("codex: items that only complete start and finish at once; declined is a failure", () => {
    const read = eventReader("codex-jsonl")!;
    const lines = [
      '{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}',
      '{"type":"item.updated","item":{"id":"item_9","type":"todo_list","items":[]}}',
      '{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"x","exit_code":0,"status":"completed"}}',
      '{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"a","kind":"add"}],"status":"completed"}}',
      '{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"rm -rf /","status":"in_progress"}}',
      '{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"rm -rf /","status":"declined"}}',
      '{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"done"}}',
      '{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2}}',
    ];
    const events = lines.flatMap(read);
    assert.deepEqual(events.map(label), [
      "start:codex:item_0:command_execution",
      "finish:codex:item_0:succeeded",
      "start:codex:item_1:file_change",
      "finish:codex:item_1:succeeded",
      "start:codex:item_2:command_execution",
      "finish:codex:item_2:failed",
      "answer",
      "report",
      "usage",
      "turn",
    ]);
    // The turn's usage, for the spend meter: Codex's input_tokens count the cached ones.
    assert.deepEqual(events.at(-1), { type: "turn", id: "codex:turn-1", input_tokens: 10, output_tokens: 2 });
  });

  it("claude: each assistant message is a model turn with its usage (cache counts are input); the result line is the run's total", () => {
    const read = eventReader("claude-stream-json")!;
    const turn = read(
      '{"type":"assistant","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":100,"cache_creation_input_tokens":5,"cache_read_input_tokens":7,"output_tokens":1},"content":[{"type":"text","text":"hi"}]}}',
    );
    assert.deepEqual(turn, [{ type: "turn", id: "claude:msg_1", model: "claude-x", input_tokens: 112, output_tokens: 1 }]);
    const total = read('{"type":"result","subtype":"success","result":"done","usage":{"input_tokens":200,"output_tokens":20}}');
    assert.deepEqual(total.find((e) => e.type === "turn"), { type: "turn", id: "result", input_tokens: 200, output_tokens: 20, total: true });
  });
});
