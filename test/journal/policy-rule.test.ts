/**
 * `journal verify`'s rule for runs under a tool policy (issue 31): every tool effect has an
 * earlier allow decision for the same call. Each tampered journal here is re-signed, whole, with
 * the node's own key, so the chain, the signatures and the lifecycle all hold: only this rule can
 * catch it, and it must name the line.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { generateSigningKey } from "../../src/journal/keys.js";
import { verifyJournal } from "../../src/journal/verify.js";
import { validateEvent } from "../../src/journal/schema.js";
import { DEFAULT_LIMITS } from "../../src/core/limits.js";
import type { JournalEvent } from "../../src/journal/types.js";
import { buildJournal, recordOf, started } from "./helpers.js";

const node = generateSigningKey().key;
const trusted = [recordOf(node)];
const DIGEST = `sha256:${"12".repeat(32)}`;

const governed: JournalEvent = { ...(started({ provider: "claude" }) as Extract<JournalEvent, { type: "run.started" }>), policy: { schema: "warden-tools-v1", digest: DIGEST } };
const decision = (callId: string, verdict: "allow" | "deny" | "ask"): JournalEvent => ({
  type: "policy.decision",
  call_id: callId,
  tool: "Bash",
  action: "shell",
  decision: verdict,
  policies: [verdict === "allow" ? "operators" : "no-push"],
  fingerprint: DIGEST,
  ...(verdict === "allow" ? {} : { reason: "forbidden by policy no-push" }),
});
const toolStart = (id: string): JournalEvent => ({ type: "effect.started", effect_id: id, kind: "tool", name: "Bash", fingerprint: DIGEST });
const toolEnd = (id: string, outcome: "succeeded" | "failed"): JournalEvent => ({ type: "effect.finished", effect_id: id, outcome });
const end: JournalEvent = { type: "run.terminated", reason: "completed", result_hash: `sha256:${"cd".repeat(32)}` };

/** A governed run: one allowed call that ran, one denied call refused. */
const clean: JournalEvent[] = [
  governed,
  decision("claude:a", "allow"),
  toolStart("claude:a"),
  toolEnd("claude:a", "succeeded"),
  decision("claude:b", "deny"),
  toolStart("claude:b"),
  toolEnd("claude:b", "failed"),
  end,
];

function failsAt(events: JournalEvent[], line: number, code: string): void {
  const report = verifyJournal(buildJournal(events, node), trusted);
  assert.equal(report.ok, false, "verification must fail");
  assert.equal(report.first_error?.code, code, report.first_error?.reason);
  assert.equal(report.first_error?.line, line, report.first_error?.reason);
}

describe("journal verify: a run under a tool policy", () => {
  it("a journal as the node writes it verifies", () => {
    assert.equal(verifyJournal(buildJournal(clean, node), trusted).ok, true);
  });

  it("a decision removed: the effect it decided is named", () => {
    const events = clean.filter((_, i) => i !== 1);
    failsAt(events, 2, "journal-tool-without-decision");
  });

  it("a decision moved after its effect: the effect's line is named", () => {
    const events = [governed, toolStart("claude:a"), decision("claude:a", "allow"), toolEnd("claude:a", "succeeded"), end];
    failsAt(events, 2, "journal-tool-without-decision");
  });

  it("a call the policy denied (or asked about) that finished succeeded: its finish is named", () => {
    for (const verdict of ["deny", "ask"] as const) {
      const events = [governed, decision("claude:a", verdict), toolStart("claude:a"), toolEnd("claude:a", "succeeded"), end];
      failsAt(events, 4, "journal-tool-not-allowed");
    }
  });

  it("a second decision for one call is named", () => {
    const events = [governed, decision("claude:a", "deny"), decision("claude:a", "allow"), toolStart("claude:a"), toolEnd("claude:a", "succeeded"), end];
    failsAt(events, 3, "journal-duplicate-decision");
  });

  it("a run without a policy needs no decisions", () => {
    const events = [started({ provider: "claude" }), toolStart("claude:a"), toolEnd("claude:a", "succeeded"), end];
    assert.equal(verifyJournal(buildJournal(events, node), trusted).ok, true);
  });

  it("the policy's record in run.started and a decision's fields are checked", () => {
    const badPolicy = { ...governed, policy: { schema: "warden-tools-v1", digest: "sha256:short" } };
    assert.throws(() => validateEvent(badPolicy, DEFAULT_LIMITS), { code: "journal-bad-event" });
    for (const bad of [{ decision: "maybe" }, { policies: [""] }, { call_id: "" }, { extra: 1 }]) {
      assert.throws(() => validateEvent({ ...decision("claude:a", "allow"), ...bad }, DEFAULT_LIMITS), { code: "journal-bad-event" }, JSON.stringify(bad));
    }
    assert.doesNotThrow(() => validateEvent(decision("claude:a", "deny"), DEFAULT_LIMITS));
  });
});
