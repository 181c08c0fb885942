import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { eventReader, type ParsedEvent } from "../../src/runner/events.js";

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

const label = (e: ParsedEvent): string => (e.type === "report" ? "report" : `${e.type}:${e.id}:${e.type === "finish" ? e.outcome : e.name}`);

describe("event readers", () => {
  it("real CLI lines without tool calls yield no effects", () => {
    const claude = eventReader("claude-stream-json")!;
    const codex = eventReader("codex-jsonl")!;
    assert.deepEqual(REAL_CLAUDE.flatMap(claude), []);
    assert.deepEqual(REAL_CODEX.flatMap(codex), []);
    assert.equal(eventReader("text"), undefined);
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
      "report",
    ]);
  });
});
