/**
 * The journal rule of a run under a tool policy (DESIGN.md "Governed tool calls"): every tool
 * effect has an earlier `policy.decision` for the same call id, and a call the policy did not
 * allow never finishes `succeeded`. A journal where a decision was removed, or moved after the
 * effect it decided, breaks it at the effect's line, even when every line is signed by the node's
 * own key: the order of the chain is what proves the decision came first.
 *
 * A call decided `ask` may run only after an operator's `policy.approval` allowed it (and after
 * the `run.parked` that waited for it): the approval is the call's allow, so it too must come
 * before the call's effect. An approval answers a parked ask, once.
 */
import type { JournalEvent } from "./types.js";

export type PolicyRuleViolation =
  | "journal-tool-without-decision"
  | "journal-tool-not-allowed"
  | "journal-duplicate-decision"
  | "journal-approval-without-ask"
  | "journal-duplicate-approval";

export class PolicyRule {
  #governed = false;
  readonly #decisions = new Map<string, string>();
  /** tool effects started, and whether their call was allowed (or approved) when they started */
  readonly #tools = new Map<string, boolean>();
  /** call ids parked for an approval, and the answer once given */
  readonly #parked = new Set<string>();
  readonly #approvals = new Map<string, string>();

  /** The rule `event` breaks, if it comes next; records it otherwise. */
  next(event: JournalEvent): { code: PolicyRuleViolation; reason: string } | undefined {
    switch (event.type) {
      case "run.started":
        this.#governed = event.policy !== undefined;
        return undefined;
      case "policy.decision":
        if (this.#decisions.has(event.call_id)) return { code: "journal-duplicate-decision", reason: `call ${JSON.stringify(event.call_id)} decided twice` };
        this.#decisions.set(event.call_id, event.decision);
        return undefined;
      case "run.parked":
        if (this.#decisions.get(event.call_id) !== "ask") return { code: "journal-approval-without-ask", reason: `run parked for call ${JSON.stringify(event.call_id)}, which no policy decided ask` };
        this.#parked.add(event.call_id);
        return undefined;
      case "policy.approval":
        if (!this.#parked.has(event.call_id)) return { code: "journal-approval-without-ask", reason: `approval for call ${JSON.stringify(event.call_id)}, for which the run was not parked` };
        if (this.#approvals.has(event.call_id)) return { code: "journal-duplicate-approval", reason: `call ${JSON.stringify(event.call_id)} approved or denied twice` };
        this.#approvals.set(event.call_id, event.decision);
        return undefined;
      case "effect.started": {
        if (!this.#governed || event.kind !== "tool") return undefined;
        if (!this.#decisions.has(event.effect_id)) {
          return { code: "journal-tool-without-decision", reason: `tool call ${JSON.stringify(event.effect_id)} started with no earlier policy decision for it` };
        }
        const decided = this.#decisions.get(event.effect_id);
        this.#tools.set(event.effect_id, decided === "allow" || (decided === "ask" && this.#approvals.get(event.effect_id) === "allow"));
        return undefined;
      }
      case "effect.finished": {
        if (!this.#tools.has(event.effect_id) || event.outcome !== "succeeded") return undefined;
        if (this.#tools.get(event.effect_id) === true) return undefined;
        const decision = this.#decisions.get(event.effect_id);
        return decision === "allow" ? undefined : { code: "journal-tool-not-allowed", reason: `tool call ${JSON.stringify(event.effect_id)} succeeded though the policy decided ${String(decision)}` };
      }
      default:
        return undefined;
    }
  }
}
