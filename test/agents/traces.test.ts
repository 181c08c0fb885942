/**
 * Traces (DESIGN.md "Traces") with the real pinned Claude Code under a real `warden serve`, against
 * the scripted model, exporting to a loopback OTLP receiver whose exports are decoded with the
 * official OTLP .proto files by Google's protobuf (test/support/otlp-receiver.ts): the run's
 * `invoke_agent` span, one `execute_tool` span per tool effect (ids, parent, times from the
 * journal, error status when failed), the caller's `traceparent` honoured — over HTTP and passed
 * on by `warden invoke` from its TRACEPARENT — and the real Claude Code's Bash tool seeing
 * TRACEPARENT = the run span. With `OTEL_SDK_DISABLED=true` nothing is sent and the agent gets no
 * context; a collector that refuses every export neither fails nor holds up a run.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ScriptedModelServer, type ScriptTurn } from "../../src/scripted-model/index.js";
import { closedPort, httpCall, repo, startNode, warden, type HttpReply, type NodeProcess, runJournal } from "../support/node.js";
import { tempDir } from "../support/temp.js";
import { waitFor } from "../support/wait.js";
import { attr, OtlpReceiver, PROTOC, type DecodedSpan } from "../support/otlp-receiver.js";

const TOKEN = "traces-operator-token-0123456789abcdef";
const KEY_VAR = "SCRIPTED_MODEL_KEY";
const CLI = join(repo, "node_modules", ".bin", "claude");
const CODEX = join(repo, "node_modules", ".bin", "codex");

interface Entry {
  entry: { seq: number; ts: string; event: { type: string; effect_id?: string; kind?: string; name?: string; outcome?: string } };
}

const bash = (command: string): ScriptTurn => ({ tool: { name: "Bash", input: { command, description: "run a command" } } });
/** What the agent's Bash prints of its trace context, found again in the tool result the model gets. */
const PRINT_CONTEXT = "printf 'ctx=<%s>\\n' \"$TRACEPARENT\"";

const hex = (bytes: number): string => randomBytes(bytes).toString("hex");
const nanos = (ts: string): bigint => BigInt(Date.parse(ts)) * 1_000_000n;

describe("traces with the real claude", { skip: !existsSync(CLI) ? `${CLI} is not installed` : !existsSync(PROTOC) ? `${PROTOC} is not installed` : false }, () => {
  const root = tempDir("traces");
  const workspace = join(root, "workspace");
  /** codex's workspace, unconfined: Codex exports its own spans to the loopback receiver (a sandbox's egress allowlist would have to name it) */
  const bare = join(root, "bare");
  let model: ScriptedModelServer;
  let receiver: OtlpReceiver;
  const nodes: NodeProcess[] = [];

  const start = (name: string, env: Record<string, string>): Promise<NodeProcess> => {
    const home = join(root, name);
    mkdirSync(home, { mode: 0o700 });
    return startNode({
      home,
      config: {
        workspaces: { main: workspace, bare },
        defaultWorkspace: "main",
        // Shell commands run without asking: the tool calls under test are the script's, not a permission prompt.
        workspacePermissions: { main: "full", bare: "full" },
        workspaceIsolation: { bare: "none" },
        providers: {
          claude: { command: CLI, model: { baseUrl: model.url, apiKeyEnv: KEY_VAR, name: "scripted-model", retries: 0 } },
          codex: { command: CODEX, model: { baseUrl: `${model.url}/v1`, apiKeyEnv: KEY_VAR, name: "scripted-model", retries: 1 } },
        },
        logLevel: "warn",
      },
      env: { WARDEN_TOKEN: TOKEN, [KEY_VAR]: "sk-scripted", HOME: join(root, "agent-home"), ...env },
      timeoutMs: 120_000,
    }).then((n) => (nodes.push(n), n));
  };
  const invoke = (node: NodeProcess, key: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<HttpReply> =>
    httpCall(node.url, TOKEN, "POST", "/v1/invocations", { headers: { "idempotency-key": key, prefer: "wait=120", ...headers }, body });
  /** What the agent's Bash printed of its context (`ctx=<...>`), as the model was sent it since request `from`. */
  const printedContexts = (from: number): string[] => [...new Set(JSON.stringify(model.requests.slice(from).map((r) => r.body)).match(/ctx=<[^>%]*>/g) ?? [])];
  const toolResults = (from: number): string => (JSON.stringify(model.requests.slice(from).map((r) => r.body)).match(/"tool_result".{0,400}/g) ?? []).join("\n");
  const runSpan = (runId: string): Promise<DecodedSpan> =>
    waitFor(`the invoke_agent span of run ${runId} at the OTLP receiver`, async () => (await receiver.spans()).find((s) => attr(s, "warden.run_id") === runId));

  before(async () => {
    for (const d of [workspace, bare, join(root, "agent-home")]) mkdirSync(d, { recursive: true });
    model = await ScriptedModelServer.start({ script: { turns: [] } });
    receiver = await OtlpReceiver.start();
  });
  after(async () => {
    for (const n of nodes) await n.kill();
    await model.close();
    await receiver.close();
    rmSync(root, { recursive: true, force: true });
  });

  describe("on (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set)", () => {
    let node: NodeProcess;
    before(async () => {
      node = await start("on", { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "warden-under-test" });
    });

    it("the run span is the caller's traceparent's child; one tool span per effect; the real claude's Bash gets TRACEPARENT", async () => {
      const traceId = hex(16);
      const parentId = hex(8);
      const from = model.requests.length;
      model.load({ turns: [bash(PRINT_CONTEXT), bash("exit 3"), { text: "Done." }] });
      const key = randomUUID();
      const reply = await invoke(node, key, { provider: "claude", prompt: "show the trace" }, { traceparent: `00-${traceId}-${parentId}-01`, tracestate: "vendor=abc" });
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.body.status, "recorded", reply.text);
      const runId = reply.body.run_id as string;

      const span = await runSpan(runId);
      assert.equal(span.service, "warden-under-test");
      assert.equal(span.name, "invoke_agent claude");
      assert.equal(span.kind, "SPAN_KIND_INTERNAL");
      assert.equal(span.trace_id, traceId, "the caller's trace");
      assert.equal(span.parent_span_id, parentId, "the caller's span is the run span's parent");
      assert.equal(attr(span, "gen_ai.operation.name"), "invoke_agent");
      assert.equal(attr(span, "gen_ai.provider.name"), "anthropic");
      assert.equal(attr(span, "gen_ai.agent.name"), "claude");
      assert.equal(attr(span, "gen_ai.request.model"), "scripted-model");
      assert.equal(attr(span, "warden.scope"), "api:operator");
      assert.equal(attr(span, "warden.idempotency_id"), key);
      assert.equal(attr(span, "warden.outcome"), "recorded");
      const conversation = attr(span, "gen_ai.conversation.id");
      assert.ok(typeof conversation === "string" && conversation.length > 0, `gen_ai.conversation.id: ${String(conversation)}`);
      assert.ok(Number(attr(span, "gen_ai.usage.input_tokens")) > 0, JSON.stringify(span.attributes));
      assert.ok(Number(attr(span, "gen_ai.usage.output_tokens")) > 0, JSON.stringify(span.attributes));
      const verification = await httpCall(node.url, TOKEN, "GET", `/v1/runs/${runId}/verification`);
      assert.equal(verification.body.ok, true, verification.text);
      assert.equal(attr(span, "warden.journal.head"), verification.body.tail_hash, "the journal's head");
      // The run's seal in the node's transparency log: the leaf its proof names.
      const proof = await httpCall(node.url, TOKEN, "GET", `/v1/log/runs/${runId}`);
      assert.equal(proof.status, 200, proof.text);
      assert.equal(attr(span, "warden.log.leaf"), proof.body.index, proof.text);

      // The real Claude Code ran its Bash tool with the run span's context, tracestate kept.
      assert.deepEqual(printedContexts(from), [`ctx=<00-${traceId}-${span.span_id}-01>`], `what the agent's Bash printed of TRACEPARENT: ${toolResults(from)}`);

      // One execute_tool span per tool effect: its id, the run span as parent, the journal's times.
      const events = (await runJournal<Entry>(node.url, TOKEN, runId)).map((e) => e.entry);
      const tools = events.filter((e) => e.event.type === "effect.started" && e.event.kind === "tool");
      assert.equal(tools.length, 2, JSON.stringify(events.map((e) => e.event)));
      const toolSpans = await waitFor(`${tools.length} execute_tool spans of run ${runId}`, async () => {
        const found = (await receiver.spans()).filter((s) => s.parent_span_id === span.span_id);
        return found.length >= tools.length ? found : undefined;
      });
      assert.equal(toolSpans.length, tools.length, JSON.stringify(toolSpans.map((s) => s.name)));
      for (const started of tools) {
        const effectId = started.event.effect_id!;
        const finished = events.find((e) => e.event.type === "effect.finished" && e.event.effect_id === effectId)!;
        const matching = toolSpans.filter((s) => attr(s, "gen_ai.tool.call.id") === effectId);
        assert.equal(matching.length, 1, `spans of tool call ${effectId}`);
        const tool = matching[0]!;
        assert.equal(tool.name, "execute_tool Bash");
        assert.equal(tool.trace_id, traceId);
        assert.equal(attr(tool, "gen_ai.operation.name"), "execute_tool");
        assert.equal(attr(tool, "gen_ai.tool.name"), "Bash");
        assert.equal(attr(tool, "warden.effect.outcome"), finished.event.outcome);
        assert.equal(BigInt(tool.start_time_unix_nano), nanos(started.ts), "starts at its effect.started");
        assert.equal(BigInt(tool.end_time_unix_nano), nanos(finished.ts), "ends at its effect.finished");
        assert.equal(tool.status?.code === "STATUS_CODE_ERROR", finished.event.outcome === "failed", `status ${JSON.stringify(tool.status)} of a ${finished.event.outcome} call`);
      }
      assert.ok(tools.some((t) => events.some((e) => e.event.type === "effect.finished" && e.event.effect_id === t.event.effect_id && e.event.outcome === "failed")), "the `exit 3` call finished failed");
    });

    it("the real codex: its command sees TRACEPARENT, and its own spans join the run's trace through the [otel] table", { skip: existsSync(CODEX) ? false : `${CODEX} is not installed` }, async () => {
      const traceId = hex(16);
      const from = model.requests.length;
      model.load({ turns: [{ tool: { name: "exec_command", input: { cmd: PRINT_CONTEXT } } }, { text: "Done." }] });
      const reply = await invoke(node, randomUUID(), { provider: "codex", prompt: "show the trace", workspace: "bare" }, { traceparent: `00-${traceId}-${hex(8)}-01` });
      assert.equal(reply.body.status, "recorded", reply.text);
      const runId = reply.body.run_id as string;
      const span = await runSpan(runId);
      assert.equal(span.name, "invoke_agent codex");
      assert.equal(attr(span, "gen_ai.provider.name"), "openai");
      assert.equal(span.trace_id, traceId);
      const conversation = attr(span, "gen_ai.conversation.id");
      assert.ok(typeof conversation === "string" && conversation.length > 0, `gen_ai.conversation.id (codex's thread): ${String(conversation)}`);
      assert.deepEqual(printedContexts(from), [`ctx=<00-${traceId}-${span.span_id}-01>`], `what codex's command printed of TRACEPARENT: ${toolResults(from)}`);
      const events = (await runJournal<Entry>(node.url, TOKEN, runId)).map((e) => e.entry);
      const tool = events.find((e) => e.event.type === "effect.started" && e.event.kind === "tool");
      assert.ok(tool !== undefined, JSON.stringify(events.map((e) => e.event)));
      await waitFor(`the execute_tool span of ${tool.event.effect_id}`, async () => (await receiver.spans()).find((s) => attr(s, "gen_ai.tool.call.id") === tool.event.effect_id && s.parent_span_id === span.span_id));
      // Codex's own spans, exported by Codex itself, in the same trace, the outermost a child of the run's span.
      const own = await waitFor("codex's own spans in the run's trace", async () => {
        const found = (await receiver.spans()).filter((s) => s.trace_id === traceId && s.service !== "warden-under-test");
        return found.some((s) => s.parent_span_id === span.span_id) ? found : undefined;
      });
      assert.ok(own.every((s) => s.service.startsWith("codex")), JSON.stringify([...new Set(own.map((s) => s.service))]));
    });

    it("`warden invoke` passes its TRACEPARENT on; without one the run span starts a trace", async () => {
      const traceId = hex(16);
      const parentId = hex(8);
      model.load({ turns: [{ text: "Hello." }] });
      const key = randomUUID();
      const cli = await warden(["invoke", "--id", key, "--provider", "claude", "--wait", "120", "--json", "hello"], {
        env: { WARDEN_URL: node.url, WARDEN_TOKEN: TOKEN, TRACEPARENT: `00-${traceId}-${parentId}-01` },
      });
      assert.equal(cli.code, 0, cli.stderr);
      const view = JSON.parse(cli.stdout) as { status: string; run_id: string };
      assert.equal(view.status, "recorded", cli.stdout);
      const span = await runSpan(view.run_id);
      assert.equal(span.trace_id, traceId);
      assert.equal(span.parent_span_id, parentId);

      model.load({ turns: [{ text: "Hello again." }] });
      const reply = await invoke(node, randomUUID(), { provider: "claude", prompt: "hello" });
      assert.equal(reply.body.status, "recorded", reply.text);
      const root = await runSpan(reply.body.run_id as string);
      assert.equal(root.parent_span_id ?? "", "", "no caller context: a root span");
      assert.notEqual(root.trace_id, traceId);
    });
  });

  it("OTEL_SDK_DISABLED=true: nothing is sent, and the agent gets no trace context", async () => {
    const node = await start("off", { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url, OTEL_SDK_DISABLED: "true" });
    const from = model.requests.length;
    model.load({ turns: [bash(PRINT_CONTEXT), { text: "Done." }] });
    const reply = await invoke(node, randomUUID(), { provider: "claude", prompt: "show the trace" }, { traceparent: `00-${hex(16)}-${hex(8)}-01` });
    assert.equal(reply.body.status, "recorded", reply.text);
    assert.deepEqual(printedContexts(from), ["ctx=<>"], `what the agent's Bash printed of TRACEPARENT: ${toolResults(from)}`);
    // Stopped, the node has sent all it ever will (a traced node flushes its spans at shutdown).
    assert.equal(await node.stop(), 0);
    const runId = reply.body.run_id as string;
    assert.deepEqual((await receiver.spans()).filter((s) => attr(s, "warden.run_id") === runId), []);
  });

  it("a collector that refuses every export: the run is recorded all the same, and the node says so once", async () => {
    const node = await start("refused", { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${await closedPort()}/v1/traces`, OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer collector-secret-123" });
    for (let i = 0; i < 2; i++) {
      model.load({ turns: [{ text: "Fine." }] });
      const reply = await invoke(node, randomUUID(), { provider: "claude", prompt: "hello" });
      assert.equal(reply.body.status, "recorded", reply.text);
    }
    assert.equal(await node.stop(), 0);
    const log = node.stdout() + node.stderr();
    const warnings = log.split("\n").filter((l) => l.includes("exporting spans failed"));
    assert.equal(warnings.length, 1, log);
    assert.ok(!log.includes("collector-secret-123"), "the collector's token reached the log");
  });
});
