import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ScriptedModelServer, parseModelScript } from "../../src/scripted-model/index.js";
import { isWardenError } from "../../src/core/errors.js";

/** The `data:` objects of an SSE body, in order. */
function events(text: string): Record<string, unknown>[] {
  return text
    .split("\n\n")
    .filter((f) => f.trim() !== "")
    .map((f) => {
      const [event, data] = f.split("\n") as [string, string];
      const parsed = JSON.parse(data.slice("data: ".length)) as Record<string, unknown>;
      assert.equal(event, `event: ${String(parsed.type)}`);
      return parsed;
    });
}

describe("scripted model script", () => {
  it("refuses what is not a script, naming the turn", () => {
    for (const [script, where] of [
      [{ turns: [{}] }, /turns\[0\]: a turn has text/],
      [{ turns: [{ text: "a" }, { tool: { name: "Bash" } }] }, /turns\[1\]: tool must be/],
      [{ turns: [{ text: "a", delay_ms: -1 }] }, /delay_ms/],
      [{ turns: [{ text: "a", drop: "yes" }] }, /drop/],
      [{ turns: [{ text: "a", extra: 1 }] }, /unknown key "extra"/],
      [{ turns: [], more: 1 }, /only `turns`/],
      ["turns", /expected/],
    ] as const) {
      assert.throws(() => parseModelScript(script), (e: unknown) => isWardenError(e) && e.code === "model-script-invalid" && where.test(e.message));
    }
    assert.deepEqual(parseModelScript([{ text: "a" }]), { turns: [{ text: "a" }] });
  });
});

describe("scripted model server", () => {
  let server: ScriptedModelServer;
  before(async () => {
    server = await ScriptedModelServer.start({
      script: { turns: [{ text: "hi" }, { tool: { name: "Bash", input: { command: "ls" } } }, { text: "cut", drop: true }] },
    });
  });
  after(() => server.close());

  const post = (path: string, body: unknown): Promise<Response> =>
    fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": "sk-secret" }, body: JSON.stringify(body) });

  it("speaks the Messages API stream for text and tool turns, and the Responses API for the same script", async () => {
    const text = events(await (await post("/v1/messages?beta=true", { stream: true })).text());
    assert.deepEqual(text.map((e) => e.type), ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]);
    assert.deepEqual(text[2]?.delta, { type: "text_delta", text: "hi" });
    assert.equal((text[4]?.delta as { stop_reason: string }).stop_reason, "end_turn");
    const tool = events(await (await post("/v1/responses", { stream: true })).text());
    assert.deepEqual(tool.map((e) => e.type), [
      "response.created",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    assert.deepEqual(tool.map((e) => e.sequence_number), [0, 1, 2, 3, 4, 5]);
    assert.deepEqual((tool[4]?.item as { name: string; arguments: string }).arguments, '{"command":"ls"}');
    assert.equal(((tool[5]?.response as { usage: { total_tokens: number } }).usage).total_tokens, 110);
  });

  it("a dropped turn ends the connection mid-stream; past the script, a 400 in the API's error shape", async () => {
    const res = await post("/v1/messages", { stream: true });
    assert.equal(res.status, 200);
    await assert.rejects(res.text());
    const exhausted = await post("/v1/responses", {});
    assert.equal(exhausted.status, 400);
    assert.equal(((await exhausted.json()) as { error: { type: string } }).error.type, "invalid_request_error");
    assert.equal((await post("/v1/other", {})).status, 404);
  });

  it("records every request with its body and outcome, never its headers", () => {
    assert.deepEqual(server.requests.map((r) => [r.protocol, r.turn, r.outcome]), [
      ["anthropic", 0, "answered"],
      ["openai", 1, "answered"],
      ["anthropic", 2, "dropped"],
      ["openai", null, "exhausted"],
      [null, null, "not-found"],
    ]);
    assert.deepEqual(server.requests[0]?.body, { stream: true });
    assert.ok(!JSON.stringify(server.requests).includes("sk-secret"));
  });
});
