/**
 * The journal rule of a run under a tool policy (DESIGN.md "Governed tool calls"): every tool
 * effect has an earlier `policy.decision` for the same call id, and a call the policy did not
 * allow never finishes `succeeded`. A journal where a decision was removed, or moved after the
 * effect it decided, breaks it at the effect's line, even when every line is signed by the node's
 * own key: the order of the chain is what proves the decision came first.
 */
import type { JournalEvent } from "./types.js";

export type PolicyRuleViolation = "journal-tool-without-decision" | "journal-tool-not-allowed" | "journal-duplicate-decision";

export class PolicyRule {
  #governed = false;
  readonly #decisions = new Map<string, string>();
  readonly #tools = new Set<string>();

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
      case "effect.started": {
        if (!this.#governed || event.kind !== "tool") return undefined;
        if (!this.#decisions.has(event.effect_id)) {
          return { code: "journal-tool-without-decision", reason: `tool call ${JSON.stringify(event.effect_id)} started with no earlier policy decision for it` };
        }
        this.#tools.add(event.effect_id);
        return undefined;
      }
      case "effect.finished": {
        if (!this.#tools.has(event.effect_id) || event.outcome !== "succeeded") return undefined;
        const decision = this.#decisions.get(event.effect_id);
        return decision === "allow" ? undefined : { code: "journal-tool-not-allowed", reason: `tool call ${JSON.stringify(event.effect_id)} succeeded though the policy decided ${String(decision)}` };
      }
      default:
        return undefined;
    }
  }
}
