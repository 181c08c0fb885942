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

  describe("a call decided ask, the run parked, then answered", () => {
    const processStart: JournalEvent = { type: "effect.started", effect_id: "process", kind: "process", name: "claude", fingerprint: DIGEST };
    const processEnd: JournalEvent = { type: "effect.finished", effect_id: "process", outcome: "succeeded" };
    const parked: JournalEvent = { type: "run.parked", call_id: "claude:a", tool: "Bash", policies: ["ask-rm"], deadline: "2026-12-07T00:00:00.000Z", session: "e1bc0f7e-1b2c-4416-aa62-89129da5a5d2", workspace: "governed" };
    const approval = (verdict: "allow" | "deny"): JournalEvent => ({ type: "policy.approval", call_id: "claude:a", decision: verdict, by: { name: "alice", role: "operator" } });
    const resumed: JournalEvent = { type: "effect.started", effect_id: "process-5", kind: "process", name: "claude", fingerprint: DIGEST };
    const resumedEnd: JournalEvent = { type: "effect.finished", effect_id: "process-5", outcome: "succeeded" };
    /** parked on an ask, approved, resumed: the call runs after its approval */
    const approved: JournalEvent[] = [governed, processStart, decision("claude:a", "ask"), processEnd, parked, approval("allow"), resumed, toolStart("claude:a"), toolEnd("claude:a", "succeeded"), resumedEnd, end];

    it("an approved call that ran after its approval verifies; so does a denied one that never ran", () => {
      assert.equal(verifyJournal(buildJournal(approved, node), trusted).ok, true);
      const denied = [governed, processStart, decision("claude:a", "ask"), processEnd, parked, approval("deny"), { ...end, reason: "failed" } as JournalEvent];
      assert.equal(verifyJournal(buildJournal(denied, node), trusted).ok, true);
    });

    it("the approval removed: the call's success is named", () => {
      failsAt(approved.filter((e) => e.type !== "policy.approval"), 8, "journal-tool-not-allowed");
    });

    it("the approval moved after the call's start: the call's success is named", () => {
      const moved = [governed, processStart, decision("claude:a", "ask"), processEnd, parked, resumed, toolStart("claude:a"), approval("allow"), toolEnd("claude:a", "succeeded"), resumedEnd, end];
      failsAt(moved, 9, "journal-tool-not-allowed");
    });

    it("a denial, then the call succeeding: named", () => {
      const denied = [governed, processStart, decision("claude:a", "ask"), processEnd, parked, approval("deny"), resumed, toolStart("claude:a"), toolEnd("claude:a", "succeeded"), resumedEnd, end];
      failsAt(denied, 9, "journal-tool-not-allowed");
    });

    it("an approval with no parked ask, a second approval, and parking with an effect open are named", () => {
      failsAt([governed, decision("claude:a", "ask"), approval("allow"), end], 3, "journal-approval-without-ask");
      failsAt([governed, decision("claude:a", "allow"), parked, end], 3, "journal-approval-without-ask");
      failsAt([governed, processStart, decision("claude:a", "ask"), processEnd, parked, approval("allow"), approval("allow"), end], 7, "journal-duplicate-approval");
      failsAt([governed, processStart, decision("claude:a", "ask"), parked, processEnd, end], 4, "journal-parked-with-open-effects");
    });

    it("the entries' fields are checked", () => {
      for (const bad of [{ deadline: "tomorrow" }, { session: "" }, { policies: [1] }, { extra: 1 }]) {
        assert.throws(() => validateEvent({ ...parked, ...bad }, DEFAULT_LIMITS), { code: "journal-bad-event" }, JSON.stringify(bad));
      }
      for (const bad of [{ decision: "ask" }, { by: { name: "alice" } }, { by: { name: "", role: "operator" } }, { reason: 3 }]) {
        assert.throws(() => validateEvent({ ...approval("allow"), ...bad }, DEFAULT_LIMITS), { code: "journal-bad-event" }, JSON.stringify(bad));
      }
    });
  });
});
