/**
 * Journals an agent's tool calls as effects, in the order the agent reported them. A call that
 * never reports a result stays open; at the end of the run it is finished `unknown`, which makes
 * the run require reconciliation (G2, G6). If the journal refuses or fails an entry, the run can
 * no longer prove what the agent does: `onLost` is called so the runner stops the agent.
 */
import type { JsonValue } from "../core/canonical.js";
import type { EffectFinishedEvent, EffectStartedEvent, NoteEvent } from "../journal/types.js";
import type { RunJournal } from "../invocations/handle.js";
import type { ParsedEvent } from "./events.js";

export class ToolEffects {
  readonly #journal: RunJournal;
  readonly #onLost: (error: unknown) => void;
  readonly #open = new Set<string>();
  readonly #seen = new Set<string>();
  #last: Promise<void> = Promise.resolve();
  #lost: unknown = undefined;

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
      // A repeated id would be a duplicate start, which the journal refuses: the first one counts.
      if (this.#seen.has(event.id)) return;
      this.#seen.add(event.id);
      this.#open.add(event.id);
      this.append({ type: "effect.started", effect_id: event.id, kind: "tool", name: event.name, fingerprint: event.fingerprint });
      return;
    }
    if (!this.#open.delete(event.id)) return; // a result for a call we never saw start
    this.append({ type: "effect.finished", effect_id: event.id, outcome: event.outcome, ...(event.detail === undefined ? {} : { detail: event.detail }) });
  }

  /** Finishes every call still open as `unknown`: the agent is gone and never reported them. */
  closeOpen(detail: JsonValue): void {
    for (const id of this.#open) this.append({ type: "effect.finished", effect_id: id, outcome: "unknown", detail });
    this.#open.clear();
  }

  /**
   * Appends in call order; the writer itself keeps entries in the order they are accepted.
   * Resolves true once the entry is durable, false when it was lost (the loss is recorded).
   */
  append(event: NoteEvent | EffectStartedEvent | EffectFinishedEvent): Promise<boolean> {
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
