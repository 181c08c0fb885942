/**
 * Journals an agent's tool calls as effects, in the order the agent reported them. A call that
 * never reports a result stays open; at the end of the run it is finished `unknown`, which makes
 * the run require reconciliation (G2, G6). If the journal refuses or fails an entry, the run can
 * no longer prove what the agent does: `onLost` is called so the runner stops the agent.
 *
 * Under a tool policy (`govern()`), a call's effect.started follows its policy decision: Claude
 * Code prints the call (the event this reads) before its pre-tool hook asks the node, so a start
 * read before its decision is held until the decision is durable, or until the call's result or
 * the end of the run shows none is coming (then it is journaled as it is, and `journal verify`
 * names it). A call the policy did not allow finishes `failed`, refused by the policy. Codex runs
 * its hook first and prints its items under ids of its own: codex-calls.ts gives them the calls'.
 */
import type { JsonValue } from "../core/canonical.js";
import type { EffectFinishedEvent, EffectStartedEvent, NoteEvent, PolicyDecisionEvent } from "../journal/types.js";
import type { RunJournal } from "../invocations/handle.js";
import type { ParsedEvent } from "./events.js";

export class ToolEffects {
  readonly #journal: RunJournal;
  readonly #onLost: (error: unknown) => void;
  readonly #open = new Set<string>();
  readonly #seen = new Set<string>();
  #last: Promise<void> = Promise.resolve();
  #lost: unknown = undefined;
  #governed = false;
  /** call id → its decision once durable (`allow`, or why it was not) */
  readonly #decisions = new Map<string, { readonly allowed: boolean; readonly reason: string }>();
  readonly #held = new Map<string, EffectStartedEvent>();
  /** calls decided `ask` and deferred: the CLI does not run them in this process (the run parks) */
  readonly #deferred = new Map<string, string>();
  /** call ids the CLI itself printed: only one of these can be the call it stopped on */
  readonly #printed = new Set<string>();

  constructor(journal: RunJournal, onLost: (error: unknown) => void) {
    this.#journal = journal;
    this.#onLost = onLost;
  }

  /** True once an entry could not be journaled. */
  get lost(): boolean {
    return this.#lost !== undefined;
  }

  get openCount(): number {
    return this.#open.size;
  }

  /** Holds each call's start until its policy decision (see the module comment). */
  govern(): void {
    this.#governed = true;
  }

  /**
   * The call deferred for an operator, with its tool's name, if there is one: the first deferred
   * call the CLI printed. The agent can reach its own decision endpoint and have an `ask` deferred
   * for a call the CLI never made; parking on that one would show the operator the agent's call
   * instead of the one the CLI stopped on.
   */
  get deferredCall(): { readonly callId: string; readonly tool: string } | undefined {
    for (const [callId, tool] of this.#deferred) if (this.#printed.has(callId)) return { callId, tool };
    return undefined;
  }

  /**
   * A call decided `ask` that the CLI defers: it does not run here, so it gets no effect (an
   * approval after the run is parked gives it one, when the resumed CLI runs it).
   */
  deferred(callId: string, tool: string): void {
    this.#deferred.set(callId, tool);
    this.#held.delete(callId);
    this.#open.delete(callId);
  }

  /**
   * The call a resumed run's CLI will run once its hook is answered (its tool_use was printed
   * before the run parked): its start is held for that answer, as a new call's is.
   */
  resumed(callId: string, name: string, fingerprint: string): void {
    this.#seen.add(callId);
    this.#open.add(callId);
    this.#held.set(callId, { type: "effect.started", effect_id: callId, kind: "tool", name, fingerprint });
  }

  /** A call's decision is durable: its held start, if any, goes to the journal now. */
  decided(callId: string, decision: "allow" | "deny" | "ask", reason: string | undefined): void {
    this.#decisions.set(callId, { allowed: decision === "allow", reason: `policy ${decision}${reason === undefined ? "" : `: ${reason}`}` });
    this.#release(callId);
  }

  /**
   * The event as the run counts it: a call the policy did not allow did not run, whatever the
   * CLI printed of it, and is refused (the result's `refused`, as a permission mode's refusal).
   */
  governed(event: ParsedEvent): ParsedEvent {
    if (event.type !== "finish") return event;
    const decision = this.#decisions.get(event.id);
    if (decision === undefined || decision.allowed) return event;
    const detail = typeof event.detail === "object" && event.detail !== null && !Array.isArray(event.detail) ? event.detail : {};
    return { ...event, outcome: "failed", refused: decision.reason, detail: { ...detail, is_error: true, refused: decision.reason } };
  }

  #release(callId: string): void {
    const start = this.#held.get(callId);
    if (start === undefined) return;
    this.#held.delete(callId);
    this.append(start);
  }

  apply(event: ParsedEvent): void {
    if (event.type === "report") {
      this.append({ type: "note", provider_report: event.report });
      return;
    }
    if (event.type === "note") {
      this.append({ type: "note", ...event.note });
      return;
    }
    if (event.type !== "start" && event.type !== "finish") return; // the answer's, not the journal's (run-answer.ts)
    if (event.type === "start") {
      this.#printed.add(event.id);
      // A repeated id would be a duplicate start, which the journal refuses: the first one counts.
      if (this.#seen.has(event.id) || this.#deferred.has(event.id)) return;
      this.#seen.add(event.id);
      this.#open.add(event.id);
      const start: EffectStartedEvent = { type: "effect.started", effect_id: event.id, kind: "tool", name: event.name, fingerprint: event.fingerprint };
      if (this.#governed && !this.#decisions.has(event.id)) this.#held.set(event.id, start);
      else this.append(start);
      return;
    }
    if (!this.#open.has(event.id)) return; // a result for a call we never saw start
    // Its result is here: no decision is coming any more.
    this.#release(event.id);
    this.#open.delete(event.id);
    this.append({ type: "effect.finished", effect_id: event.id, outcome: event.outcome, ...(event.detail === undefined ? {} : { detail: event.detail }) });
  }

  /** Finishes every call still open as `unknown`: the agent is gone and never reported them. */
  closeOpen(detail: JsonValue): void {
    for (const id of [...this.#held.keys()]) this.#release(id);
    for (const id of this.#open) this.append({ type: "effect.finished", effect_id: id, outcome: "unknown", detail });
    this.#open.clear();
  }

  /**
   * Appends in call order; the writer itself keeps entries in the order they are accepted.
   * Resolves true once the entry is durable, false when it was lost (the loss is recorded).
   */
  append(event: NoteEvent | EffectStartedEvent | EffectFinishedEvent | PolicyDecisionEvent): Promise<boolean> {
    if (this.#lost !== undefined) return Promise.resolve(false);
    const durable = this.#journal.append(event).then(
      () => true,
      (error: unknown) => {
        if (this.#lost === undefined) {
          this.#lost = error;
          this.#onLost(error);
        }
        return false;
      },
    );
    this.#last = this.#last.then(() => durable.then(() => undefined));
    return durable;
  }

  /** Resolves when every entry appended so far is durable (or the loss was recorded). */
  settled(): Promise<void> {
    return this.#last;
  }
}
