/**
 * Pairs a governed Codex run's tool items with its pre-tool hook's calls (DESIGN.md "Governed tool
 * calls", Codex). codex-cli 0.171 gives its hook the model's call id (`tool_use_id`, e.g.
 * `call_…`), but its `exec --json` items carry ids of their own (`item_3`) and no call id, so an
 * item's effect would never name the call its decision was for, and `journal verify` could not
 * tie them. Codex runs the hook before it starts the call, so every allowed call's decision is
 * known when its item starts: the item takes the call id of the oldest allowed, not yet paired
 * decision of its kind (`Bash` → command_execution, `apply_patch` → file_change, `mcp__s__t` →
 * `mcp:s/t`); a command item only that of a decision for its very command (Codex prints `<shell>
 * -lc '<command>'`). An item no decision pairs with keeps its own id, and verification names it.
 *
 * A call the policy did not allow never becomes an item (Codex prints nothing of it): its
 * effect is journaled from the decision, started and finished refused, as Claude Code's are.
 */
import type { ToolCall } from "../policy/tool-call.js";
import type { ParsedEvent, ToolEvent } from "./events.js";

interface Pending {
  readonly callId: string;
  readonly kind: string;
  readonly command: string;
}

/** The exec item name a Codex hook tool becomes. */
function itemName(tool: string): string {
  if (tool === "Bash") return "command_execution";
  if (tool === "apply_patch") return "file_change";
  const mcp = /^mcp__(.+?)__(.+)$/.exec(tool);
  return mcp === null ? tool : `mcp:${mcp[1] ?? ""}/${mcp[2] ?? ""}`;
}

export class CodexCalls {
  /** allowed calls whose item has not started, oldest first */
  readonly #pending: Pending[] = [];
  /** item id → the call id it was paired with */
  readonly #paired = new Map<string, string>();

  /**
   * A call's durable decision: an allowed one waits for its item; one not allowed is journaled
   * now, as a call refused (the returned events go through the runner's usual path).
   */
  decided(call: ToolCall, allowed: boolean): ToolEvent[] {
    const kind = itemName(call.resource.tool);
    if (allowed) {
      this.#pending.push({ callId: call.callId, kind, command: call.resource.command });
      return [];
    }
    return [
      { type: "start", id: call.callId, name: kind, fingerprint: call.fingerprint },
      { type: "finish", id: call.callId, outcome: "failed" },
    ];
  }

  /** The event with its item id replaced by its call's, where a decision pairs with it. */
  paired(event: ParsedEvent): ParsedEvent {
    if (event.type === "finish") {
      const callId = this.#paired.get(event.id);
      return callId === undefined ? event : { ...event, id: callId };
    }
    if (event.type !== "start") return event;
    const ofKind = this.#pending.filter((p) => p.kind === event.name);
    const unwrapped = event.command === undefined ? undefined : shellCommandOf(event.command);
    // A command Codex printed as `<shell> -c <command>` pairs only with a decision for that very
    // command: an allow the agent registered on the socket for a harmless command cannot cover a
    // call its hook never asked about.
    const match = unwrapped !== undefined ? ofKind.find((p) => p.command === unwrapped) : ofKind[0];
    if (match === undefined) return event;
    this.#pending.splice(this.#pending.indexOf(match), 1);
    this.#paired.set(event.id, match.callId);
    return { ...event, id: match.callId };
  }
}

/** The command of Codex's `<shell> -c|-lc <command>` line, or undefined when it is not one. */
export function shellCommandOf(line: string): string | undefined {
  const words = shellWords(line);
  if (words === undefined || words.length !== 3 || !/^-l?c$/.test(words[1] ?? "")) return undefined;
  return words[2];
}

/** POSIX shell words (quotes and backslashes, no expansion); undefined for an unclosed quote. */
export function shellWords(line: string): string[] | undefined {
  const words: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string;
    if (c === " " || c === "\t" || c === "\n") {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) return undefined;
      word = (word ?? "") + line.slice(i + 1, end);
      i = end;
    } else if (c === '"') {
      word ??= "";
      for (i++; ; i++) {
        if (i >= line.length) return undefined;
        const d = line[i] as string;
        if (d === '"') break;
        // Inside double quotes a backslash escapes only these.
        if (d === "\\" && i + 1 < line.length && '$`"\\\n'.includes(line[i + 1] as string)) word += line[++i];
        else word += d;
      }
    } else if (c === "\\" && i + 1 < line.length) {
      word = (word ?? "") + line[++i];
    } else {
      word = (word ?? "") + c;
    }
  }
  if (word !== undefined) words.push(word);
  return words;
}
