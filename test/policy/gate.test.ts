/**
 * A run's decision socket (src/policy/gate.ts) against what a hostile agent can send it: the
 * socket is inside its sandbox, so anything may arrive. A real socket, a real Cedar policy; the
 * journal is a recorder whose appends resolve when the test says (durability is the writer's job,
 * tested with it): an allow must not be answered before its entry is durable.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as http from "node:http";
import { join } from "node:path";
import { rmSync } from "node:fs";
import { DECIDE_PATH, DecisionGate, type PolicyDecisionEvent } from "../../src/policy/gate.js";
import { ToolPolicy } from "../../src/policy/tool-policy.js";
import { tempDir } from "../support/temp.js";

const POLICY = ToolPolicy.compile(
  `@id("no-push") forbid(principal, action == Action::"shell", resource) when { resource.command like "*git push*" };
@id("deploy") @ask forbid(principal, action == Action::"file.write", resource) when { resource.path like "/srv/deploy/*" };
@id("clean") @ask forbid(principal, action == Action::"shell", resource) when { resource.command like "rm -rf *" };
@id("all") permit(principal, action, resource);`,
  "test.cedar",
);

const dir = tempDir("gate");
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

async function gateWith(append: (event: PolicyDecisionEvent) => Promise<boolean>, provider?: "codex"): Promise<DecisionGate> {
  return DecisionGate.listen(join(dir, `g${n++}.sock`), {
    ...(provider === undefined ? {} : { provider }),
    policy: POLICY,
    workspace: "/srv/workspace",
    principal: { scope: "api:op", name: "op", role: "operator" },
    context: { workspace: "main", run: "r1", provider: "claude", bundle_id: "", revision: "", signers: [] },
    journal: { append },
  });
}

/** One call over the run's socket, as the hooks make it; the CLI's hook output read back as the gate's answer. */
function ask(socket: string, body: string): Promise<{ decision: string; reason?: string }> {
  return post({ socketPath: socket }, body).then(({ status, text }) => {
    assert.equal(status, 200, text);
    if (text === "") return { decision: "allow" };
    const out = (JSON.parse(text) as { hookSpecificOutput: { permissionDecision: string; permissionDecisionReason?: string } }).hookSpecificOutput;
    return { decision: out.permissionDecision, ...(out.permissionDecisionReason === undefined ? {} : { reason: out.permissionDecisionReason }) };
  });
}

function post(target: { socketPath: string } | { port: number }, body: string, headers: Record<string, string> = {}, path = DECIDE_PATH): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ ...("port" in target ? { host: "127.0.0.1", port: target.port } : target), method: "POST", path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const call = (id: string, tool: string, input: Record<string, unknown>): string =>
  JSON.stringify({ hook_event_name: "PreToolUse", session_id: "s", cwd: "/srv/workspace", tool_name: tool, tool_input: input, tool_use_id: id });

describe("a run's decision socket", () => {
  it("answers allow only once the decision is durable, and journals what decided it", async () => {
    let release: (ok: boolean) => void = () => undefined;
    const journaled: PolicyDecisionEvent[] = [];
    const gate = await gateWith((event) => {
      journaled.push(event);
      return new Promise((resolve) => (release = resolve));
    });
    let answered = false;
    const answer = ask(gate.socketPath, call("toolu_1", "Bash", { command: "ls" })).then((a) => ((answered = true), a));
    while (journaled.length === 0) await new Promise((r) => setImmediate(r));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(answered, false, "allow was answered before the decision was durable");
    release(true);
    assert.deepEqual(await answer, { decision: "allow" });
    assert.deepEqual({ ...journaled[0], fingerprint: undefined }, { type: "policy.decision", call_id: "claude:toolu_1", tool: "Bash", action: "shell", decision: "allow", policies: ["all"], fingerprint: undefined });
    await gate.close();
  });

  it("a deny and an ask are answered as denials with the reason; a path is matched absolute", async () => {
    const journaled: PolicyDecisionEvent[] = [];
    const gate = await gateWith(async (event) => (journaled.push(event), true));
    const push = await ask(gate.socketPath, call("toolu_2", "Bash", { command: "git push origin main" }));
    assert.equal(push.decision, "deny");
    assert.match(push.reason ?? "", /forbidden by policy no-push/);
    const deploy = await ask(gate.socketPath, call("toolu_3", "Write", { file_path: "../../srv/deploy/app.yml", content: "x" }));
    assert.equal(deploy.decision, "deny");
    assert.match(deploy.reason ?? "", /approval.*cannot wait for one/);
    assert.deepEqual(journaled.map((e) => [e.call_id, e.decision, e.policies]), [
      ["claude:toolu_2", "deny", ["no-push"]],
      ["claude:toolu_3", "ask", ["deploy"]],
    ]);
    await gate.close();
  });

  it("hostile input: a call id decided twice, input that is not a call or not JSON, a journal that lost the decision: denied, never a second entry", async () => {
    const journaled: PolicyDecisionEvent[] = [];
    let durable = true;
    const gate = await gateWith(async (event) => (journaled.push(event), durable));
    // An agent registers an allow for an id the model has not used yet...
    assert.equal((await ask(gate.socketPath, call("toolu_9", "Bash", { command: "ls" }))).decision, "allow");
    // ...and the real call under that id is refused, whatever it is.
    const again = await ask(gate.socketPath, call("toolu_9", "Bash", { command: "ls" }));
    assert.equal(again.decision, "deny");
    assert.match(again.reason ?? "", /decided already/);
    for (const body of ["not json", "[]", JSON.stringify({ hook_event_name: "PostToolUse", tool_name: "Bash", tool_use_id: "x" }), call("../../etc", "Bash", {})]) {
      const answer = await ask(gate.socketPath, body);
      assert.equal(answer.decision, "deny", body);
    }
    assert.equal(journaled.length, 1, JSON.stringify(journaled));
    durable = false;
    const lost = await ask(gate.socketPath, call("toolu_10", "Bash", { command: "ls" }));
    assert.equal(lost.decision, "deny");
    assert.match(lost.reason ?? "", /could not be journaled/);
    assert.equal(gate.decision("claude:toolu_10")?.decision, "deny");
    await gate.close();
  });

  it("a codex run's socket reads Codex's hook input: codex:<call id>, apply_patch a file edit, and ask is deny saying codex exec cannot ask", async () => {
    const journaled: PolicyDecisionEvent[] = [];
    const gate = await gateWith(async (event) => (journaled.push(event), true), "codex");
    // Closed whatever happens: a gate left listening keeps the test process alive.
    try {
      const patch = await ask(gate.socketPath, call("call_6", "apply_patch", { command: "*** Begin Patch\n*** Add File: /srv/deploy/app.yml\n+x\n*** End Patch\n" }));
      assert.equal(patch.decision, "allow");
      const clean = await ask(gate.socketPath, call("call_7", "Bash", { command: "rm -rf build" }));
      assert.equal(clean.decision, "deny");
      assert.match(clean.reason ?? "", /approval.*codex exec cannot ask for an approval, so ask is deny/);
      assert.equal((await ask(gate.socketPath, call("call_8", "Bash", { command: "git push" }))).decision, "deny");
      assert.deepEqual(journaled.map((e) => [e.call_id, e.tool, e.action, e.decision]), [
        ["codex:call_6", "apply_patch", "file.edit", "allow"],
        ["codex:call_7", "Bash", "shell", "ask"],
        ["codex:call_8", "Bash", "shell", "deny"],
      ]);
    } finally {
      await gate.close();
    }
  });

  it("the loopback port of an unconfined Claude run answers only its own token, only POST /v1/decide, and journals nothing it refused", async () => {
    const journaled: PolicyDecisionEvent[] = [];
    const gate = await gateWith(async (event) => (journaled.push(event), true));
    try {
      const port = await gate.listenLoopback("run-token");
      const ls = call("toolu_20", "Bash", { command: "ls" });
      for (const headers of [{} as Record<string, string>, { authorization: "Bearer other-run" }, { authorization: "Bearer run-token2" }, { authorization: "run-token" }]) {
        assert.equal((await post({ port }, ls, headers)).status, 401, JSON.stringify(headers));
      }
      assert.equal((await post({ port }, ls, { authorization: "Bearer run-token" }, "/v1/other")).status, 404);
      assert.equal(journaled.length, 0, "nothing refused for its token or path is decided");
      const allowed = await post({ port }, ls, { authorization: "Bearer run-token" });
      assert.deepEqual(allowed, { status: 200, text: "" });
      const denied = await post({ port }, call("toolu_21", "Bash", { command: "git push" }), { authorization: "Bearer run-token" });
      assert.match(JSON.parse(denied.text).hookSpecificOutput.permissionDecisionReason, /no-push/);
      assert.deepEqual(journaled.map((e) => [e.call_id, e.decision]), [["claude:toolu_20", "allow"], ["claude:toolu_21", "deny"]]);
    } finally {
      await gate.close();
    }
  });
});
